#!/usr/bin/env python3
"""Preload tests of reliability (issue 28): output files made safely, settings reported once per
process tree, and faults injected at the driver calls the shim makes itself.

The same runner as run_preload_tests.py (its PreloadCase, Expect and arguments), in a file of its
own; CTest runs one group per test (preload.outputfiles, preload.optionsonce, preload.faults).

    python3 tests/preload/run_reliability_tests.py --shim build/shim/libgpumemshim.so \\
        --fake-dir build/tests/preload/fakecuda --bin-dir build/tests/preload/bin PreloadOutputFiles
"""
import os
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_preload_tests as base  # noqa: E402
from run_preload_tests import KiB, Expect, PreloadCase  # noqa: E402


def shim_lines(run):
    return [l for l in run.stderr.splitlines() if l.startswith("gpumemshim:")]


class PreloadOutputFiles(PreloadCase):
    """The statistics and trace files: never through a symlink, never over a device, a FIFO or
    another user's file; write errors said once, with their reason; no partial file left."""

    def tmpdir(self):
        d = tempfile.mkdtemp(prefix="gms-out-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        return d

    def plant(self, d, name, kind):
        """Something at d/name that the shim must leave alone; returns a check that it is intact."""
        path = os.path.join(d, name)
        if kind == "symlink":
            victim = os.path.join(d, "victim")
            with open(victim, "w") as f:
                f.write("precious\n")
            os.symlink(victim, path)
            return lambda: (os.path.islink(path) and open(victim).read() == "precious\n")
        if kind == "fifo":
            os.mkfifo(path)
            return lambda: stat.S_ISFIFO(os.lstat(path).st_mode)
        if kind == "device":  # the numbers of /dev/null, in a directory of our own
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            return lambda: stat.S_ISCHR(os.lstat(path).st_mode)
        if kind == "other user's file":
            with open(path, "w") as f:
                f.write("theirs\n")
            os.chown(path, 65534, 65534)
            return lambda: open(path).read() == "theirs\n" and os.stat(path).st_uid == 65534
        raise ValueError(kind)

    def kinds(self):
        # A device node and another user's file need root to plant.
        return ["symlink", "fifo"] + (["device", "other user's file"] if os.geteuid() == 0 else [])

    def check_left_alone(self, variable, name, says):
        """Each kind of thing planted at the path: one warning, left as it was, no temporary file."""
        for kind in self.kinds():
            with self.subTest(kind=kind):
                d = self.tmpdir()
                intact = self.plant(d, name, kind)
                run = self.run_program("direct", env={variable: os.path.join(d, name)}, timeout=60)
                lines = shim_lines(run)
                self.assertEqual(len(lines), 1, run.stderr)
                self.assertIn(says, lines[0])
                self.assertTrue(intact(), f"the {kind} at the path was changed")
                self.assertEqual([n for n in os.listdir(d) if ".tmp-" in n], [], "a temporary file was left")
                if variable != "GPUMEMSHIM_STATS":
                    self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))

    def test_statistics_path_is_never_followed_or_replaced(self):
        self.check_left_alone("GPUMEMSHIM_STATS", "stats.json", "cannot write statistics to GPUMEMSHIM_STATS=")

    def test_trace_path_is_never_followed_or_replaced(self):
        self.check_left_alone("GPUMEMSHIM_TRACE", "trace.jsonl", "the program runs untraced")

    def test_statistics_write_error_says_why(self):
        # A file-size limit stands in for a full disk: one warning with the reason, no partial file,
        # and the program's own exit status.
        d = self.tmpdir()
        path = os.path.join(d, "stats.json")
        run = self.run_program("direct", env={"GPUMEMSHIM_STATS": path}, preexec=base.limit_file_size(100, False))
        lines = shim_lines(run)
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertIn("cannot write the file: File too large", lines[0])
        self.assertEqual(os.listdir(d), [], "a partial statistics file was left")

    def test_trace_write_error_is_said_once(self):
        # The header fits, the rest does not: whichever writer meets the error first (the writer
        # thread, or the exit's drain before the end line), there is one warning. A short program
        # leaves it to the exit (where the end line was written after the stop and warned again).
        for program, limit in (("direct", 1024), ("threads", 1024), ("threads", 64 * KiB)):
            with self.subTest(program=program, limit=limit):
                d = self.tmpdir()
                run = self.run_program(program, env={"GPUMEMSHIM_TRACE": os.path.join(d, "t.jsonl"),
                                                     "GPUMEMSHIM_STATS": None},
                                       preexec=base.limit_file_size(limit, False))
                lines = shim_lines(run)
                self.assertEqual(len(lines), 1, run.stderr)
                self.assertIn("(File too large): tracing stopped, the program goes on", lines[0])

    def test_statistics_replace_the_users_own_file(self):
        d = self.tmpdir()
        path = os.path.join(d, "stats.json")
        with open(path, "w") as f:
            f.write("old\n" * 10000)
        run = self.run_program("direct", env={"GPUMEMSHIM_STATS": path})
        self.assertEqual(shim_lines(run), [])
        with open(path) as f:
            self.assertIn('"gpumemshim-stats"', f.read())


class PreloadOptionsOnce(PreloadCase):
    """Settings that cannot hurt: ranges checked where they are parsed, the reason said, and a bad
    value reported once per process tree (the first report marks the environment)."""

    def shell(self, script, **settings):
        env = self.base_env()
        env["LD_PRELOAD"] = self.preload_list()
        env.update(settings)
        proc = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stderr

    def test_said_once_per_process_tree(self):
        # Seven processes with the same settings: one line. A child with other settings says its own.
        err = self.shell("for i in 1 2 3; do /bin/true; done; sh -c /bin/true; "
                         "GPUMEMSHIM_POLICY=bogus /bin/true; env | grep -c GPUMEMSHIM_REPORTED",
                         GPUMEMSHIM_HOST_THRESHOLD="0")
        threshold = [l for l in err.splitlines() if "GPUMEMSHIM_HOST_THRESHOLD" in l]
        policy = [l for l in err.splitlines() if "GPUMEMSHIM_POLICY" in l]
        self.assertEqual(len(threshold), 2, err)  # the first process, and the child with a new setting
        self.assertEqual(len(policy), 1, err)
        self.assertTrue(all(l.startswith("gpumemshim: ") for l in threshold + policy), err)

    def test_unknown_name_said_once(self):
        err = self.shell("/bin/true; /bin/true; sh -c /bin/true", GPUMEMSHIM_NO_SUCH_OPTION="1")
        self.assertEqual(len([l for l in err.splitlines() if "GPUMEMSHIM_NO_SUCH_OPTION" in l]), 1, err)

    def test_refusals_say_what_was_wrong(self):
        cases = {
            "GPUMEMSHIM_DEVICE_LIMIT": ("0:8G,0:4G", "a device given twice"),
            "GPUMEMSHIM_REGISTER_LIMIT": ("200%", "a percentage above 100"),
            "GPUMEMSHIM_SWAP_CHUNK": ("3M", "not a power of two from 2M to 64M"),
            "GPUMEMSHIM_HOST_THRESHOLD": ("0", "below 64K"),
            "GPUMEMSHIM_MANAGED_LIMIT": ("99999999999T", "too large"),
        }
        for name, (value, why) in cases.items():
            with self.subTest(name=name):
                lines = [l for l in self.shell("/bin/true", **{name: value}).splitlines() if name in l]
                self.assertEqual(len(lines), 1, lines)
                self.assertIn(f"{name}='{value}' is not valid ({why}; expected ", lines[0])
                self.assertIn("the shim runs as pass-through", lines[0])
        # A value from the environment cannot break the line.
        lines = self.shell("/bin/true", GPUMEMSHIM_POLICY="a\nb\x1b").splitlines()
        self.assertEqual([l for l in lines if "GPUMEMSHIM_POLICY" in l], ["gpumemshim: GPUMEMSHIM_POLICY='a?b?' is not "
                         "valid (expected auto|spill|off|managed|pinned|swap); the shim runs as pass-through"])

    def test_pool_keeps_small_blocks_out(self):
        # Blocks under 1 MiB never take a 2 MiB pool granule, whatever HOST_THRESHOLD says: the pool
        # hands out exactly the same blocks with a 64K threshold as with the default 1M.
        def pool_decisions(threshold):
            run = self.run_program("host", env={"GPUMEMSHIM_HOST_POOL": "1G", "GPUMEMSHIM_HOST_THRESHOLD": threshold})
            d = self.only_stats(run)["decisions"]
            return {k: d[k] for k in ("pool_new", "pool_reused")}
        if base.Config.shadowed_malloc():
            self.skipTest("the sanitizer's allocator serves malloc: the pool is not reached")
        at_1m = pool_decisions("1M")
        self.assertGreater(at_1m["pool_new"]["calls"], 0, "the pool served nothing: the test proves nothing")
        self.assertEqual(pool_decisions("64K"), at_1m)


class PreloadFaults(PreloadCase):
    """Faults injected at every driver call (tests/preload/fake/fake_fault.h): for every policy, every
    implementation the workload reaches (the program's calls and the shim's own) and every N, the
    Nth call fails. The program (progs/faults.cc) must end with correct results or with the
    injected error, having freed everything: never a crash, a hang, wrong data or a leak (nothing
    live in the shim's registry at exit)."""

    MANAGED_CAP = {"GPUMEMSHIM_MANAGED_LIMIT": "256M"}
    POLICIES = {
        "off": {"GPUMEMSHIM_POLICY": "off"},
        "spill": {"GPUMEMSHIM_POLICY": "spill", "GPUMEMSHIM_DEVICE_LIMIT": "8M", **MANAGED_CAP},
        "spill-pinned": {"GPUMEMSHIM_POLICY": "spill", "GPUMEMSHIM_SPILL": "pinned",
                         "GPUMEMSHIM_DEVICE_LIMIT": "8M", **MANAGED_CAP},
        "managed": {"GPUMEMSHIM_POLICY": "managed", "GPUMEMSHIM_DEVICE_LIMIT": "8M", **MANAGED_CAP},
        "pinned": {"GPUMEMSHIM_POLICY": "pinned", **MANAGED_CAP},
        "swap": {"GPUMEMSHIM_POLICY": "swap", "GPUMEMSHIM_DEVICE_LIMIT": "8M", "GPUMEMSHIM_SWAP_CHUNK": "4M",
                 **MANAGED_CAP},
        "swap-scan": {"GPUMEMSHIM_POLICY": "swap", "GPUMEMSHIM_DEVICE_LIMIT": "8M", "GPUMEMSHIM_SWAP_CHUNK": "4M",
                      "GPUMEMSHIM_SWAP_ORDER": "scan", **MANAGED_CAP},
        "swap-scan-park": {"GPUMEMSHIM_POLICY": "swap", "GPUMEMSHIM_DEVICE_LIMIT": "8M", "GPUMEMSHIM_SWAP_CHUNK": "4M",
                           "GPUMEMSHIM_SWAP_ORDER": "scan", "GPUMEMSHIM_SWAP_PARK": "on", **MANAGED_CAP},
    }
    # Copies through the shim's registration, and everything else as configured.
    COMMON = {"GPUMEMSHIM_REGISTER": "always", "GPUMEMSHIM_HOST_POOL": "64M"}

    def run_faulted(self, env, fault=None, counts=None):
        e = dict(self.COMMON, **env)
        e["FAKE_CUDA_FAIL"] = fault
        e["FAKE_CUDA_COUNTS"] = counts
        try:
            run = self.run_program("faults", env=e, expect_rc=None, timeout=60)
        except AssertionError as exc:  # a hang
            return None, str(exc)
        return run, None

    def problem(self, run):
        """Why this run is not acceptable, or None."""
        rc = run.proc.returncode
        if rc not in (0, 3):
            return f"exit status {rc}\n{run.stdout}{run.stderr[-3000:]}"
        if not run.stats and rc == 3 and "cuMemGetInfo" not in run.stdout:
            return None  # failed before any call the shim counts: it writes no statistics
        if len(run.stats) != 1:
            return f"{len(run.stats)} statistics files\n{run.stdout}{run.stderr[-2000:]}"
        st = next(iter(run.stats.values()))
        # Host blocks are malloc's; the shim's registrations stay with the pool's pages by design.
        live = {k: v for k, v in st["live_bytes_at_exit"].items() if v and k not in ("host_block", "shim_registered")}
        if live:
            return f"still live at exit (a leak): {live}\n{run.stdout}"
        return None

    def test_every_call_failing_once(self):
        budget = os.environ.get("GMS_FAULTS_MAX_PER_KIND")  # a cap per kind, for slow sanitizer builds
        cap = int(budget) if budget else (3 if base.Config.sanitize else 0)
        failures, tried = [], 0
        only = os.environ.get("GMS_FAULTS_POLICIES")  # by hand: a comma-separated subset
        for policy, env in self.POLICIES.items():
            if only and policy not in only.split(","):
                continue
            with tempfile.NamedTemporaryFile(prefix="gms-fault-counts-") as counts:
                run, hang = self.run_faulted(env, counts=counts.name)
                self.assertIsNone(hang, hang)
                self.assertEqual(run.proc.returncode, 0, f"{policy} without faults:\n{run.stdout}{run.stderr}")
                self.assertIsNone(self.problem(run), policy)
                with open(counts.name) as f:
                    kinds = [(name, int(n)) for name, n in (line.split() for line in f)]
            self.assertGreater(len(kinds), 5, f"{policy}: the workload reached almost nothing")
            for name, n in kinds:
                nths = range(1, n + 1)
                if cap and n > cap:  # the first ones and the last
                    nths = list(range(1, cap)) + [n]
                for nth in nths:
                    tried += 1
                    run, hang = self.run_faulted(env, fault=f"{name}:{nth}")
                    why = hang or self.problem(run)
                    if why:
                        failures.append(f"{policy}, {name} failing at call {nth}: {why}")
        if failures:
            self.fail(f"{len(failures)} of {tried} faulted runs went wrong (each first, then the first in full):\n" +
                      "\n".join(f.splitlines()[0][:200] for f in failures) + "\n\n" + failures[0])


RESERVED = r"""
import ctypes, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
if sys.argv[1] == "cuda":
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    free_b, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cuda.cuCtxSetCurrent(ctx) == 0
    assert cuda.cuMemGetInfo_v2(ctypes.byref(free_b), ctypes.byref(total)) == 0
blocks = [libc.malloc(8 << 20) for _ in range(4)]
reserved = 0
for line in open("/proc/self/maps"):
    f = line.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    if f[1] == "---p" and len(f) == 5 and hi - lo >= 256 << 20:
        reserved += hi - lo
print(reserved)
"""


class PreloadNoGpuCost(PreloadCase):
    """A process that never loads the CUDA driver pays for no host pool: nothing is reserved, its
    large blocks are glibc's. The pool starts with the first large block after the driver loads."""

    def reserved(self, mode):
        env = self.base_env()
        env.update({"LD_PRELOAD": self.preload_list(), "GPUMEMSHIM_HOST_POOL": "1G"})
        proc = subprocess.run([sys.executable, "-c", RESERVED, mode], env=env, capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return int(proc.stdout.split()[-1])

    def test_pool_waits_for_the_driver(self):
        if base.Config.shadowed_malloc():
            self.skipTest("the sanitizer's allocator serves malloc: the pool is not reached")
        self.assertEqual(self.reserved("plain"), 0, "address space reserved by a process with no CUDA")
        self.assertGreaterEqual(self.reserved("cuda"), 1 << 30, "no pool after the driver was loaded")


if __name__ == "__main__":
    base.main()
