#!/usr/bin/env python3
"""End-to-end tests of `gpumemshim report` (tools/report), stdlib unittest only.

The sample traces are tests/tools/traces/*.jsonl (written by make_traces.py there); the expected
outputs are tests/tools/golden/. After a deliberate change of the report, regenerate the golden
files and review the diff:

    GMS_REGENERATE_GOLDEN=1 ctest --test-dir build -R tools.ReportGoldenTest
    git diff tests/tools/golden/

CTest passes GMS_TOOL (the command) and GMS_SOURCE_DIR; by hand, e.g.:
    GMS_TOOL=build/tools/gpumemshim GMS_SOURCE_DIR=. python3 tests/tools/test_report.py -v ReportRejectTest
ReportBrowserTest needs Debian's chromium (tools/install-deps.sh --tests installs it) and is skipped
without it; GMS_REPORT_SCREENSHOT=path keeps its screenshot.
"""
import html.parser
import json
import os
import random
import re
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest

TOOL = os.path.abspath(os.environ["GMS_TOOL"]) if os.environ.get("GMS_TOOL") else ""
SOURCE_DIR = os.environ.get("GMS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TRACES = os.path.join(SOURCE_DIR, "tests", "tools", "traces")
GOLDEN = os.path.join(SOURCE_DIR, "tests", "tools", "golden")
REGENERATE = os.environ.get("GMS_REGENERATE_GOLDEN", "") not in ("", "0")


def report(*args, cwd=TRACES, timeout=120):
    """Runs the command from the traces folder, so that file names in outputs are stable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMSHIM_") and k != "LD_PRELOAD"}
    return subprocess.run([TOOL, "report", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# name -> the traces it reads (with options); every case has text and JSON golden files, the
# ones in PERFETTO_CASES a Perfetto one too.
CASES = {
    "um_faults": ["um_faults.jsonl"],
    "um_prefetched": ["um_prefetched.jsonl"],
    "copies": ["copies.jsonl"],
    "copies_top1": ["copies.jsonl", "--top", "1"],
    "two_ranks": ["rank0.jsonl", "rank1.jsonl"],
    "truncated": ["truncated.jsonl"],
    "training": ["training.jsonl"],
    "ping_pong": ["ping_pong.jsonl"],
    "ping_pong_census": ["ping_pong_census.jsonl"],
}
PERFETTO_CASES = ("um_faults", "copies", "two_ranks")


class ReportGoldenTest(unittest.TestCase):
    """Text, JSON and Perfetto outputs of the sample traces, byte for byte."""

    def check(self, name, actual):
        path = os.path.join(GOLDEN, name)
        if REGENERATE:
            os.makedirs(GOLDEN, exist_ok=True)
            with open(path, "w") as f:
                f.write(actual)
            return
        self.assertTrue(os.path.exists(path), "%s is missing: run with GMS_REGENERATE_GOLDEN=1" % path)
        with open(path) as f:
            expected = f.read()
        if expected != actual:
            import difflib
            diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                                "golden/" + name, "actual", n=2))
            self.fail("%s differs from the golden file (GMS_REGENERATE_GOLDEN=1 to accept):\n%s" % (name, diff[:6000]))

    def test_text(self):
        for name, args in CASES.items():
            with self.subTest(name):
                r = report(*args)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.check(name + ".txt", r.stdout)

    def test_json(self):
        for name, args in CASES.items():
            with self.subTest(name):
                r = report(*args, "--json")
                self.assertEqual(r.returncode, 0, r.stderr)
                json.loads(r.stdout)
                self.check(name + ".json", r.stdout)

    def test_perfetto(self):
        for name in PERFETTO_CASES:
            with self.subTest(name), tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "t.json")
                r = report(*CASES[name], "--perfetto", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(out) as f:
                    self.check(name + ".perfetto.json", f.read())

    def test_truncated_trace_warns_and_reports(self):
        r = report("truncated.jsonl")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("truncated.jsonl:20: the last line is cut off; ignored", r.stderr)
        self.assertIn("truncated.jsonl: trace ends early (the program was killed?)", r.stderr)
        self.assertIn("trace ends early (the program was killed?)", r.stdout)
        self.assertIn("saxpy", r.stdout)


class ReportRejectTest(unittest.TestCase):
    """Traces the report cannot use: exit 2, nothing on stdout, one line naming file and line."""

    def assert_rejected(self, args, message):
        r = report(*args)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertIn(message, r.stderr)
        return r

    def test_bad_json_names_line_7(self):
        r = self.assert_rejected(["bad_json_line7.jsonl"],
                                 "gpumemshim report: bad_json_line7.jsonl:7: not valid JSON: expected ',' or '}' "
                                 "in an object (column 58)")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_wrong_first_line(self):
        self.assert_rejected(["wrong_first_line.jsonl"],
                             "gpumemshim report: wrong_first_line.jsonl:1: not a gpumemshim trace: the first line "
                             "must be its header")

    def test_newer_version(self):
        self.assert_rejected(["version99.jsonl"],
                             "gpumemshim report: version99.jsonl: trace format version 99 is newer than this "
                             "gpumemshim reads (version 1)")

    def test_one_bad_file_among_good_ones(self):
        self.assert_rejected(["um_faults.jsonl", "bad_json_line7.jsonl"], "bad_json_line7.jsonl:7:")

    def test_missing_and_empty_files(self):
        self.assert_rejected(["no-such-trace.jsonl"], "no-such-trace.jsonl: cannot open")
        with tempfile.TemporaryDirectory() as tmp:
            empty = os.path.join(tmp, "empty.jsonl")
            open(empty, "w").close()
            self.assert_rejected([empty], "empty.jsonl: empty file, not a gpumemshim trace")

    def test_bad_arguments(self):
        self.assert_rejected([], "no trace file given")
        self.assert_rejected(["--top", "many", "um_faults.jsonl"], "--top needs a whole number")
        self.assert_rejected(["--frobnicate", "um_faults.jsonl"], "unknown option '--frobnicate'")
        self.assert_rejected(["um_faults.jsonl", "--html"], "--html needs a value")

    def test_unwritable_output_is_exit_1(self):
        r = report("um_faults.jsonl", "--html", "/nonexistent-dir/r.html")
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot write the HTML report to /nonexistent-dir/r.html", r.stderr)

    def test_help(self):
        r = report("--help")
        self.assertEqual(r.returncode, 0)
        for option in ("--json", "--perfetto", "--html", "--top"):
            self.assertIn(option, r.stdout)


def documented_keys():
    """The key paths listed in tools/report/README.md between its json-keys markers."""
    with open(os.path.join(SOURCE_DIR, "tools", "report", "README.md")) as f:
        text = f.read()
    block = text.split("<!-- json-keys:begin -->")[1].split("<!-- json-keys:end -->")[0]
    return set(re.findall(r"^\| `([^`]+)` \|", block, re.MULTILINE))


def key_paths(value, prefix=""):
    """Every key path of a JSON value: objects' keys joined by '.', array items as '[]'. Maps whose
    keys are data (causes, types, reasons) are listed as '*'; the tallies that recur (unified
    memory, copies) are documented once, as '<um>.x' and '<copies>.x'."""
    data_maps = ("migrated_bytes_by_cause", "unknown_types", "register_why", "unregister_why", "failures")
    paths = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if prefix.rsplit(".", 1)[-1] in data_maps:
                paths.add(prefix + ".*")
                continue
            p = prefix + "." + k if prefix else k
            paths.add(p)
            if k in ("um", "unattributed_um"):
                paths |= key_paths(v, "<um>")
            elif (k == "copies" and prefix in ("sites[]", "ranges[]")) or p == "copies.all":
                paths |= key_paths(v, "<copies>")
            else:
                paths |= key_paths(v, p)
    elif isinstance(value, list):
        for v in value:
            paths |= key_paths(v, prefix + "[]")
    return paths


class ReportStepsTest(unittest.TestCase):
    """The repeating step of a training loop (training.jsonl: ten kernels a step, three activations
    over the budget), the bound its budget allows, and the step timeline --timeline writes."""

    def step_of(self, lines):
        """The report's one step of a trace made of these records."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.jsonl")
            with open(path, "w") as f:
                for l in lines:
                    f.write(json.dumps(l) + "\n")
            r = report(path, "--json", cwd=tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        (step,) = json.loads(r.stdout)["steps"]
        return step

    def test_step_and_bounds(self):
        r = report("training.jsonl", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        (s,) = json.loads(r.stdout)["steps"]
        self.assertNotIn("missing", s)
        self.assertEqual((s["period"], s["steps"], s["first_launch"]), (10, 5, 30))
        self.assertEqual(s["budget"], 1 << 30)
        self.assertEqual(s["peak_bytes"], 1792 << 20, "the weights and five activations")
        self.assertEqual(s["kernel_ns"], 10 * 2000000)
        self.assertEqual(s["busy_ns"], s["kernel_ns"])
        self.assertEqual(s["measured_ns"], s["busy_ns"] + s["idle_ns"])
        # The recorded run's copies overlap no kernel: the idle time while they run is theirs.
        self.assertGreater(s["idle_copying_ns"], 0)
        self.assertLessEqual(s["idle_copying_ns"], min(s["idle_ns"], s["copy_in_ns"] + s["copy_out_ns"]))
        self.assertEqual((s["copied_in"], s["copied_out"]), (3 * 256 << 20, 3 * 256 << 20))
        # 768 MiB over the budget at the peak go out during the forward pass and come back during the
        # backward pass, each at 54.6 GB/s: 14.7 ms each way, the first copy out after the first
        # kernel (its last use) and the last copy in before the last kernel (its use): 2 ms each.
        self.assertAlmostEqual(s["floor_ns"] / 1e6, 2 * (2 + 768 * (1 << 20) / 54.6e6), delta=0.5)
        self.assertGreaterEqual(s["bound_ns"], s["floor_ns"])
        # It binds where the five activations are alive together, with those 768 MiB away.
        self.assertEqual((s["floor_away"], s["floor_kernel"]), (768 << 20, "forward_4"))
        self.assertLessEqual(abs(s["floor_out_ns"] + s["floor_in_ns"] - s["floor_ns"]), 1)
        self.assertAlmostEqual(s["floor_in_ns"] / 1e6, 768 * (1 << 20) / 54.6e6, delta=0.1, msg="the copies in alone")
        self.assertGreater(s["measured_ns"], s["bound_ns"], "the recorded run waits for every copy")
        self.assertGreaterEqual(s["plan_in"], 768 << 20)
        self.assertTrue(s["feasible"])

    def test_budget_option(self):
        def step(*args):
            r = report("training.jsonl", "--json", *args)
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)["steps"][0]
        own = step()
        roomy = step("--budget", "2G")
        self.assertEqual((roomy["budget"], roomy["floor_ns"], roomy["bound_ns"]), (2 << 30, 0, 0), "the peak fits")
        tight = step("--budget", "768M")
        self.assertGreater(tight["floor_ns"], own["floor_ns"])
        self.assertGreater(tight["plan_in"], own["plan_in"])
        r = report("training.jsonl", "--budget", "lots")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--budget needs a size", r.stderr)

    def test_text_table(self):
        out = report("training.jsonl").stdout
        self.assertIn("Repeating step", out)
        self.assertRegex(out, r"pid 7100 +10 +5 ")

    def test_step_found_with_what_follows_the_loop(self):
        """After the loop a program launches other kernels (a collective, an evaluation), and
        between two launches it may make and free memory that no kernel uses: neither hides the step
        (seen in DistributedDataParallel's traces, 2026-11-26)."""
        with open(os.path.join(TRACES, "training.jsonl")) as f:
            lines = [json.loads(l) for l in f]
        launches = [l for l in lines if l["type"] == "launch"]
        kernels = [l for l in lines if l["type"] == "kernel"]
        mid = launches[len(launches) - 15]
        extra = [{"type": "alloc", "t": mid["t"] + 1, "ptr": "0x7d0000000000", "bytes": 1 << 20, "device": 0,
                  "api": "cuMemAllocAsync", "kind": "device", "placement": "swap"},
                 {"type": "free", "t": mid["t"] + 2, "ptr": "0x7d0000000000", "bytes": 1 << 20, "api": "cuMemFreeAsync"}]
        t, seq, end = launches[-1]["t"], launches[-1]["seq"], kernels[-1]["end"]
        for k in range(3):
            t, seq, end = t + 3000000, seq + 1, end + 3000000
            extra.append({"type": "launch", "t": t, "seq": seq, "stream": "0x0", "fn": hex(0x6000 + k), "regions": []})
            extra.append({"type": "kernel", "t": end - 1000000, "end": end, "name": f"after_{k}", "device": 0,
                          "stream": 7, "correlation": 900 + k, "grid": [1, 1, 1], "block": [1, 1, 1]})
        s = self.step_of(lines + extra)
        self.assertNotIn("missing", s)
        self.assertEqual(s["period"], 10)

    def test_step_found_when_a_kernel_is_loaded_anew_each_step(self):
        """Libraries that build kernels at run time load the same kernel under a new function
        handle each time (cuDNN's attention while decoding: a new handle every token): the step is
        the sequence of kernel names, and it is found (the decoding traces of 2026-11-27 gave a
        layer instead of the token before)."""
        with open(os.path.join(TRACES, "training.jsonl")) as f:
            lines = [json.loads(l) for l in f]
        launches = sorted((l for l in lines if l["type"] == "launch" and not l.get("part")), key=lambda l: l["seq"])
        fifth = [l for k, l in enumerate(launches) if k % 10 == 4]
        for k, l in enumerate(fifth):
            l["fn"] = hex(0x9000 + k)  # the same kernel (its name in the kernel records), a new handle each step
        s = self.step_of(lines)
        self.assertNotIn("missing", s)
        self.assertEqual((s["period"], s["steps"]), (10, 5))

    def test_both_directions_at_once(self):
        """copy_both_ns: how long copies in and copies out ran at once. The recorded run's copies
        took turns (0); with a copy in added inside every copy out, 2 ms each, the step has 2 ms of
        both per copy out."""
        (s,) = json.loads(report("training.jsonl", "--json").stdout)["steps"]
        self.assertEqual(s["copy_both_ns"], 0)
        with open(os.path.join(TRACES, "training.jsonl")) as f:
            lines = [json.loads(l) for l in f]
        extra = [{"type": "memcpy", "t": l["t"] + 1000000, "end": l["t"] + 3000000, "bytes": 1 << 20, "copy_kind": "htod",
                  "src_kind": "pinned", "dst_kind": "device", "device": 0, "stream": 159, "correlation": 0}
                 for l in lines if l["type"] == "memcpy" and l["copy_kind"] == "dtoh"]
        both = self.step_of(lines + extra)
        outs = s["copied_out"] // (256 << 20)
        self.assertEqual(outs, 3)
        self.assertEqual(both["copy_both_ns"], outs * 2000000)
        self.assertEqual(both["idle_copying_ns"], s["idle_copying_ns"], "inside copies that ran anyway")

    def test_no_launch_lines_says_why(self):
        (s,) = json.loads(report("copies.jsonl", "--json").stdout)["steps"]
        self.assertIn("no launch lines", s["missing"])

    def test_timeline_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "step.tl")
            r = report("training.jsonl", "--timeline", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                lines = [l.split() for l in f if not l.startswith("#")]
            self.assertEqual(lines[0], ["timeline", "1", "10"])
            kernels = [l for l in lines if l[0] == "kernel"]
            allocs = [l for l in lines if l[0] == "alloc"]
            self.assertEqual(len(kernels), 10)
            self.assertEqual(sorted(a[3] for a in allocs).count("persistent"), 1, "the weights")
            self.assertEqual(len(allocs), 6)
            # Kernel 9 (the last backward kernel) uses the first activation and the weights; its
            # function is none of the others'.
            first = next(a[1] for a in allocs if a[3] == "0")
            self.assertEqual(sorted(kernels[9][4:]), sorted([first, next(a[1] for a in allocs if a[3] == "persistent")]))
            self.assertEqual(len({k[2] for k in kernels}), 10)
            r = report("copies.jsonl", "--timeline", out)
            self.assertEqual(r.returncode, 1)
            self.assertIn("no step timeline", r.stderr)


class ReportJsonTest(unittest.TestCase):
    """The JSON document is a contract: every key is documented, and keys do not come and go."""

    def test_every_key_is_documented(self):
        documented = documented_keys()
        seen = set()
        for args in CASES.values():
            r = report(*args, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            seen |= key_paths(json.loads(r.stdout))
        self.assertEqual(sorted(seen - documented), [], "keys in the output but not in tools/report/README.md")
        self.assertEqual(sorted(documented - seen), [], "keys in tools/report/README.md that no sample shows")

    def test_same_keys_with_or_without_data(self):
        full = json.loads(report("rank0.jsonl", "rank1.jsonl", "--json").stdout)
        bare = json.loads(report("truncated.jsonl", "--json").stdout)
        self.assertEqual(sorted(full.keys()), sorted(bare.keys()))
        self.assertEqual(sorted(full["totals"].keys()), sorted(bare["totals"].keys()))
        self.assertEqual(sorted(full["copies"].keys()), sorted(bare["copies"].keys()))

    def test_two_ranks_merge(self):
        doc = json.loads(report("rank0.jsonl", "rank1.jsonl", "--json").stdout)
        self.assertEqual([t["rank"] for t in doc["traces"]], [0, 1])
        self.assertEqual([t["offset_ns"] for t in doc["traces"]], [0, 350000000])
        self.assertEqual(doc["sites_by"], "api")
        self.assertEqual({r["rank"] for r in doc["regions"]}, {0, 1})
        self.assertEqual(doc["totals"]["dropped_records"]["cupti"], 12)
        self.assertEqual(doc["totals"]["unknown_types"], {"future_event": 2})
        kinds = [o["kind"] for o in doc["offenders"]]
        self.assertIn("thrashing", kinds)
        self.assertIn("fault_migration", kinds)

    def test_prefetch_beats_faults(self):
        faults = json.loads(report("um_faults.jsonl", "--json").stdout)
        prefetched = json.loads(report("um_prefetched.jsonl", "--json").stdout)
        self.assertEqual(faults["offenders"][1]["kind"], "fault_migration")
        self.assertLess(faults["offenders"][1]["gbps"], 7)
        self.assertEqual(prefetched["totals"]["migrated_bytes_by_cause"], {"coherence": 1 << 30,
                                                                           "user_prefetch": 3 << 30})
        self.assertEqual([d["what"] for d in prefetched["decisions"]], ["prefetch"])
        self.assertNotIn("fault_migration", [o["kind"] for o in prefetched["offenders"]])


class ReportPerfettoTest(unittest.TestCase):
    """The timeline is what Perfetto and chrome://tracing load: well-formed events, nested slices."""

    def load(self, *traces):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "t.json")
            r = report(*traces, "--perfetto", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                return json.load(f)

    def test_structure(self):
        doc = self.load("rank0.jsonl", "rank1.jsonl")
        events = doc["traceEvents"]
        names = {}
        for e in events:
            self.assertIn(e["ph"], ("X", "i", "C", "M"))
            self.assertIsInstance(e["pid"], int)
            self.assertIsInstance(e["tid"], int)
            if e["ph"] == "M":
                if e["name"] == "thread_name":
                    names[(e["pid"], e["tid"])] = e["args"]["name"]
                continue
            self.assertGreaterEqual(e["ts"], 0)
            if e["ph"] == "X":
                self.assertGreaterEqual(e["dur"], 0)
        self.assertEqual({p for p, _ in names}, {7000, 7001})
        tracks = set(names.values())
        for want in ("shim decisions", "NVTX thread 7100", "NVTX thread 7101", "GPU 0 stream 7", "GPU 1 stream 7",
                     "GPU 0 unified memory", "GPU 1 unified memory events"):
            self.assertIn(want, tracks)
        process_names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
        self.assertEqual(process_names, ["rank 0 (pid 7000) on gpu-node-3", "rank 1 (pid 7001) on gpu-node-3"])
        counters = [e for e in events if e["ph"] == "C"]
        self.assertTrue(counters)
        self.assertEqual(set(counters[0]["args"]), {"used", "resident", "limit"})
        kinds = {(e["ph"], e.get("cat")) for e in events}
        for want in (("X", "kernel"), ("X", "memcpy"), ("X", "nvtx"), ("X", "unified memory"),
                     ("i", "unified memory"), ("i", "decision"), ("X", "copy call")):
            self.assertIn(want, kinds)
        # Rank 1 started 0.35 s after rank 0: its first budget line (2 ms into its run) says so.
        first = min(e["ts"] for e in counters if e["pid"] == 7001)
        self.assertAlmostEqual(first, 352000.0)

    def test_slices_nest_on_every_track(self):
        for traces in (["rank0.jsonl", "rank1.jsonl"], ["copies.jsonl"], ["um_faults.jsonl"]):
            doc = self.load(*traces)
            per_track = {}
            for e in doc["traceEvents"]:
                if e["ph"] == "X":
                    per_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
            for track, slices in per_track.items():
                slices.sort(key=lambda s: (s[0], -s[1]))
                open_ends = []
                for start, end in slices:
                    while open_ends and open_ends[-1] <= start + 1e-9:
                        open_ends.pop()
                    self.assertTrue(not open_ends or end <= open_ends[-1] + 1e-9,
                                    "slices overlap without nesting on %s of %s" % (track, traces))
                    open_ends.append(end)


class ReportScaleTest(unittest.TestCase):
    """A trace of a million lines streams: bounded time and memory, exact totals."""

    LINES = 1_000_000

    def test_million_lines(self):
        rng = random.Random(1)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "big.jsonl")
            expected_bytes = 0
            faults = 0
            with open(path, "w") as f:
                f.write(json.dumps({"type": "header", "format": "gpumemshim-trace", "version": 1, "host": "h",
                                    "pid": 1, "t0_ns": 0, "wall_t0": "2026-11-21T00:00:00Z", "faults": True,
                                    "devices": []}) + "\n")
                base = 0x7f0000000000
                f.write('{"type": "alloc", "t": 0, "ptr": "0x%x", "bytes": %d, "device": 0, "api": "cuMemAllocManaged",'
                        ' "kind": "managed", "placement": "passthrough"}\n' % (base, 1 << 36))
                t = 1000
                for i in range(self.LINES // 10):
                    f.write('{"type": "kernel", "t": %d, "end": %d, "name": "k%d", "device": 0, "stream": 7, '
                            '"correlation": %d, "grid": [1, 1, 1], "block": [32, 1, 1]}\n' % (t, t + 9000, i % 50, i))
                    if i % 9 == 0:  # about one line in ninety
                        f.write('{"type": "budget", "t": %d, "device": 0, "limit": 8000000000, "used": %d, '
                                '"resident": 0}\n' % (t, rng.randrange(8000000000)))
                    for j in range(9 if i % 9 else 8):
                        a = base + rng.randrange(1 << 36) // 4096 * 4096
                        if j % 3 == 0:
                            v = rng.randint(1, 100)
                            faults += v
                            f.write('{"type": "um", "t": %d, "end": %d, "counter": "gpu_fault", "address": "0x%x", '
                                    '"bytes": 0, "value": %d, "access": "read", "device": 0}\n' % (t + j * 900, t + j * 900, a, v))
                        else:
                            expected_bytes += 65536
                            f.write('{"type": "um", "t": %d, "end": %d, "counter": "htod", "address": "0x%x", '
                                    '"bytes": 65536, "value": 0, "cause": "coherence", "device": 0}\n' % (t + j * 900, t + j * 900 + 800, a))
                    t += 10000
                f.write('{"type": "end", "events": %d, "dropped": 0}\n' % self.LINES)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.monotonic()
            r = report(path, "--json", timeout=280)
            elapsed = time.monotonic() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            self.assertEqual(doc["totals"]["um"]["htod_bytes"], expected_bytes)
            self.assertEqual(doc["totals"]["um"]["gpu_faults"], faults)
            self.assertEqual(doc["regions"][0]["um"]["htod_bytes"], expected_bytes)
            self.assertEqual(sum(k["launches"] for k in doc["kernels"]), self.LINES // 10)
            # About 100 MB of text in compact events: a DOM of the file would need several GB.
            peak_mb = max(before.ru_maxrss, after.ru_maxrss) / 1024
            self.assertLess(peak_mb, 600, "the reader should keep compact events, not the text")
            print("\n1M lines: %.1f s, peak RSS of children %.0f MB" % (elapsed, peak_mb), file=sys.stderr)
            self.assertLess(elapsed, 120)
            # The page stays small: plots keep a bounded number of points, tables a bounded number of rows.
            page = os.path.join(tmp, "big.html")
            r = report(path, "--html", page, timeout=280)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertLess(os.path.getsize(page), 4 << 20)


class SvgCollector(html.parser.HTMLParser):
    """Collects the plots of a page (svg.plot) and what is drawn in each."""

    def __init__(self):
        super().__init__()
        self.plots = {}
        self.current = None
        self.body = {}
        self.external = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag in ("script", "img", "link", "iframe") and ("src" in a or "href" in a):
            self.external.append((tag, a))
        if tag == "svg" and "plot" in a.get("class", ""):
            self.current = a["id"]
            self.plots[self.current] = {"attrs": a, "paths": 0, "rects": 0, "circles": 0, "texts": 0}
        elif self.current and "mark" in (a.get("class") or ""):
            if tag == "path" and a.get("d"):
                self.plots[self.current]["paths"] += 1
            if tag == "rect" and float(a.get("width", 0)) > 0:
                self.plots[self.current]["rects"] += 1
            if tag == "circle":
                self.plots[self.current]["circles"] += 1
        elif self.current and tag == "text":
            self.plots[self.current]["texts"] += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.current = None


PLOTS = ("plot-bandwidth", "plot-memory", "plot-faults", "plot-copies")


def write_html(traces, out):
    r = report(*traces, "--html", out)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    with open(out) as f:
        return f.read()


class ReportHtmlTest(unittest.TestCase):
    """The page is one self-contained file with the four plots and the tables."""

    def test_self_contained_with_plots_and_tables(self):
        with tempfile.TemporaryDirectory() as tmp:
            page = write_html(["rank0.jsonl", "rank1.jsonl"], os.path.join(tmp, "r.html"))
        p = SvgCollector()
        p.feed(page)
        self.assertEqual(p.external, [])
        # The only URL is SVG's namespace name, which is never fetched.
        self.assertEqual(set(re.findall(r"https?://[^\"'\s)]+", page)), {"http://www.w3.org/2000/svg"})
        self.assertNotIn("@import", page)
        self.assertEqual(sorted(p.plots), sorted(PLOTS))
        self.assertGreater(p.plots["plot-bandwidth"]["paths"], 0)
        self.assertGreater(p.plots["plot-memory"]["paths"], 0)
        self.assertGreater(p.plots["plot-faults"]["circles"], 0)
        self.assertGreater(p.plots["plot-copies"]["rects"], 0)
        for plot in PLOTS:  # axis labels, ticks and legends are text
            self.assertGreater(p.plots[plot]["texts"], 5, plot)
        for label in ("bandwidth (GB/s)", "device memory (GB)", "bytes copied (GB)", "time since the start"):
            self.assertIn(label, page)
        for table in ("table-totals", "table-sites", "table-regions", "table-kernels", "table-ranges", "table-copies",
                      "table-registration", "table-decisions"):
            self.assertIn('id="%s"' % table, page)

    def test_empty_plots_say_so(self):
        with tempfile.TemporaryDirectory() as tmp:
            page = write_html(["copies.jsonl"], os.path.join(tmp, "r.html"))
        self.assertIn("no unified-memory records in the trace", page)


class ReportSafetyTest(unittest.TestCase):
    """The report never destroys its input and never writes through a symlink or over a device;
    '-' is standard input; a file given twice counts once; hostile names reach the terminal escaped."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gms-report-safety-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        for name in ("run-1.jsonl", "run-2.jsonl"):
            shutil.copy(os.path.join(TRACES, "rank0.jsonl" if name == "run-1.jsonl" else "rank1.jsonl"),
                        os.path.join(self.tmp, name))

    def contents(self, name):
        with open(os.path.join(self.tmp, name), "rb") as f:
            return f.read()

    def test_output_name_forgotten_keeps_the_traces(self):
        # The README's glob after --html: the first trace would become the page.
        before = self.contents("run-1.jsonl")
        for flag in ("--html", "--perfetto"):
            with self.subTest(flag=flag):
                r = report(flag, "run-1.jsonl", "run-2.jsonl", cwd=self.tmp)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(f"{flag} run-1.jsonl would overwrite a trace: name another file (or add --force)", r.stderr)
                self.assertEqual(self.contents("run-1.jsonl"), before)
                r = report("run-1.jsonl", flag, "run-1.jsonl", cwd=self.tmp)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("would overwrite a trace this report reads", r.stderr)
                self.assertEqual(self.contents("run-1.jsonl"), before)
        r = report("--html", "run-1.jsonl", "--force", "run-2.jsonl", cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(self.contents("run-1.jsonl").startswith(b"<!DOCTYPE html>"))

    def test_outputs_never_follow_symlinks_or_replace_devices(self):
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        os.symlink(victim, os.path.join(self.tmp, "link.html"))
        r = report("run-1.jsonl", "--html", "link.html", cwd=self.tmp)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("cannot write link.html (a symlink is there; it is neither followed nor replaced)", r.stderr)
        self.assertEqual(self.contents("victim"), b"precious\n")
        self.assertTrue(os.path.islink(os.path.join(self.tmp, "link.html")))
        r = report("run-1.jsonl", "--perfetto", "/dev/null", cwd=self.tmp)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("a device, FIFO or socket is there", r.stderr)
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))
        # An ordinary file of the user's is replaced whole, and no temporary file stays behind.
        with open(os.path.join(self.tmp, "old.html"), "w") as f:
            f.write("x" * 100000)
        r = report("run-1.jsonl", "--html", "old.html", cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(self.contents("old.html").startswith(b"<!DOCTYPE html>"))
        self.assertEqual([n for n in os.listdir(self.tmp) if ".tmp-" in n], [])

    def test_standard_input_and_the_same_file_twice(self):
        with open(os.path.join(self.tmp, "run-1.jsonl")) as f:
            r = subprocess.run([TOOL, "report", "--json", "-"], stdin=f, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(json.loads(r.stdout)["traces"]), 1)
        os.link(os.path.join(self.tmp, "run-1.jsonl"), os.path.join(self.tmp, "same.jsonl"))
        r = report("--json", "run-1.jsonl", "./run-1.jsonl", "same.jsonl", "run-2.jsonl", cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(json.loads(r.stdout)["traces"]), 2)
        self.assertIn("note: ./run-1.jsonl is the same file as run-1.jsonl: read once", r.stderr)
        self.assertIn("note: same.jsonl is the same file as run-1.jsonl: read once", r.stderr)

    def test_hostile_names_are_escaped(self):
        path = os.path.join(self.tmp, "hostile.jsonl")
        with open(os.path.join(TRACES, "rank0.jsonl")) as src, open(path, "w") as f:
            f.write(src.readline())
            f.write(json.dumps({"type": "kernel", "t": 1, "end": 2, "name": "a\u0000b\u001b[2J", "device": 0}) + "\n")
        r = subprocess.run([TOOL, "report", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"\x00", r.stdout)
        self.assertNotIn(b"\x1b", r.stdout)
        self.assertIn(b"a\\x00b\\x1b[2J", r.stdout)
        self.assertIn(b"Top offenders", r.stdout, "the report was cut short")


class ReportBrowserTest(unittest.TestCase):
    """The page in a real browser (Debian's chromium, headless): the plots are laid out and drawn."""

    def setUp(self):
        self.chromium = find_chromium()
        if not self.chromium:
            self.skipTest("chromium not found: install it (apt-get install -y chromium, or tools/install-deps.sh "
                          "--tests) to check the HTML report in a browser")

    def run_chromium(self, tmp, *args):
        profile = tempfile.mkdtemp(dir=tmp)
        cmd = [self.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--user-data-dir=" + profile, *args]
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)

    def test_plots_render(self):
        with tempfile.TemporaryDirectory() as tmp:
            page = os.path.join(tmp, "report.html")
            write_html(["rank0.jsonl", "rank1.jsonl"], page)
            r = self.run_chromium(tmp, "--virtual-time-budget=5000", "--dump-dom", "file://" + page)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            dom = r.stdout
            # The page's script ran after layout and found every plot drawn (marks with a size).
            self.assertIn('data-plots="4"', dom)
            self.assertIn('data-plots-drawn="4"', dom, "a plot drew nothing in the browser")
            p = SvgCollector()
            p.feed(dom)
            self.assertEqual(sorted(p.plots), sorted(PLOTS))
            for plot in PLOTS:
                self.assertGreater(int(p.plots[plot]["attrs"].get("data-marks-drawn", "0")), 0, plot)
            shot = os.environ.get("GMS_REPORT_SCREENSHOT") or os.path.join(tmp, "report.png")
            r = self.run_chromium(tmp, "--window-size=1200,2400", "--hide-scrollbars", "--screenshot=" + shot,
                                  "file://" + page)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            with open(shot, "rb") as f:
                png = f.read()
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
            self.assertGreater(len(png), 50000, "the screenshot is nearly empty")


if __name__ == "__main__":
    if not TOOL:
        sys.exit("GMS_TOOL is not set (CTest sets it; see this file's docstring)")
    # CTest runs one class per test: a class skipped as a whole exits 77, which CTest shows as skipped.
    if sys.argv[-1] == "ReportBrowserTest" and not find_chromium():
        print("ReportBrowserTest skipped: chromium not found (apt-get install -y chromium, or "
              "tools/install-deps.sh --tests)")
        sys.exit(77)
    unittest.main()
