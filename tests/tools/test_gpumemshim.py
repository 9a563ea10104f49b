#!/usr/bin/env python3
"""End-to-end tests of the `gpumemshim` command (tools/), stdlib unittest only.

CTest passes the paths in the environment (tests/tools/CMakeLists.txt): GMS_TOOL (the command),
GMS_SHIM (libgpumemshim.so), GMS_SOURCE_DIR, GMS_BUILD_DIR, GMS_CMAKE, GMS_VERSION and, when the
preload layer's stand-in driver is built, GMS_FAKE_CUDA_DIR. Run one class by
hand with, e.g.:  GMS_TOOL=build/tools/gpumemshim ... python3 tests/tools/test_gpumemshim.py RunChildTest
"""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

TOOL = os.environ.get("GMS_TOOL", "")
SHIM = os.environ.get("GMS_SHIM", "")
SOURCE_DIR = os.environ.get("GMS_SOURCE_DIR", "")
BUILD_DIR = os.environ.get("GMS_BUILD_DIR", "")
CMAKE = os.environ.get("GMS_CMAKE", "cmake")
VERSION = os.environ.get("GMS_VERSION", "")

# In a sanitizer build the shim carries the sanitizer's runtime, which cannot be loaded into the
# uninstrumented programs these tests run (sh, sleep): children under the shim are the preload
# layer's to test there. What runs in this process, the command's own code, is tested in both.
SANITIZED = bool(os.environ.get("GMS_SANITIZE"))
child_under_shim = unittest.skipIf(SANITIZED, "sanitizer build: the shim is not preloadable into sh")

MARK_BEGIN = "<!-- options:begin -->"
MARK_END = "<!-- options:end -->"


def clean_env(**extra):
    """The caller's environment without anything that would change the command's behaviour."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUMEMSHIM_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def gms(*args, env=None, timeout=60, tool=None):
    return subprocess.run([tool or TOOL, *args], env=env if env is not None else clean_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


def option_names_from_def():
    """Every variable name in shim/core/options.def, read independently of the command."""
    with open(os.path.join(SOURCE_DIR, "shim", "core", "options.def")) as f:
        text = f.read()
    names = re.findall(r'^\s*GMS_OPTION\(\s*\w+\s*,\s*"(\w+)"', text, re.MULTILINE)
    return ["GPUMEMSHIM_" + n for n in names]


def option_defaults_from_def():
    """(variable, default) for every option in options.def."""
    with open(os.path.join(SOURCE_DIR, "shim", "core", "options.def")) as f:
        text = f.read()
    found = re.findall(r'^\s*GMS_OPTION\(\s*\w+\s*,\s*"(\w+)"\s*,\s*\w+\s*,\s*"([^"]*)"', text, re.MULTILINE)
    return [("GPUMEMSHIM_" + n, d) for n, d in found]


def flag_of(variable):
    return "--" + variable[len("GPUMEMSHIM_"):].lower().replace("_", "-")


def preload_entries(value):
    return [e for e in re.split(r"[ :]", value.strip()) if e]


class RunOptionsTest(unittest.TestCase):
    """Every option is checked before anything starts; a bad one is exit 2 and one naming line."""

    def assert_refused(self, result, *needles):
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stdout, "", "nothing may run when an option is bad")
        for n in needles:
            self.assertIn(n, result.stderr)

    def test_bad_policy(self):
        r = gms("run", "--policy", "bogus", "--", "sh", "-c", "echo started")
        self.assert_refused(r, "--policy", "bogus", "GPUMEMSHIM_POLICY", "off")

    def test_bad_policy_inline_form(self):
        self.assert_refused(gms("run", "--policy=bogus", "--", "true"), "--policy", "bogus")

    def test_ranges_are_checked_and_the_reason_said(self):
        # The shim's own range checks (core/options.cc), so `run` refuses exactly what the shim would.
        for args, why in ((["--swap-chunk", "3M"], "not a power of two from 2M to 64M"),
                          (["--swap-chunk", "128M"], "not a power of two from 2M to 64M"),
                          (["--device-limit", "0:8G,0:4G"], "a device given twice"),
                          (["--device-limit", "200%"], "a percentage above 100"),
                          (["--register-limit=0%"], "a percentage of 0"),
                          (["--host-threshold", "0"], "below 64K")):
            with self.subTest(args=args):
                r = gms("run", *args, "--", "sh", "-c", "echo started")
                self.assert_refused(r, why)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        r = gms("run", "--", "sh", "-c", "echo started", env=clean_env(GPUMEMSHIM_SWAP_CHUNK="3M"))
        self.assert_refused(r, "GPUMEMSHIM_SWAP_CHUNK='3M' is not valid (not a power of two from 2M to 64M; accepted:")

    @child_under_shim
    def test_values_within_range_run(self):
        r = gms("run", "--swap-chunk", "4M", "--host-threshold", "64K", "--", "sh", "-c", "echo started")
        self.assertEqual((r.returncode, r.stdout), (0, "started\n"), r.stderr)

    def test_bad_log_level(self):
        r = gms("run", "--log", "loud", "--", "sh", "-c", "echo started")
        self.assert_refused(r, "--log", "loud", "GPUMEMSHIM_LOG", "quiet|error|warn|info|debug")

    def test_bad_stats_in_environment(self):
        r = gms("run", "--", "sh", "-c", "echo started", env=clean_env(GPUMEMSHIM_STATS=""))
        self.assert_refused(r, "GPUMEMSHIM_STATS", "json")

    def test_bad_size_in_environment(self):
        r = gms("run", "--", "sh", "-c", "echo started", env=clean_env(GPUMEMSHIM_HOST_THRESHOLD="12Q"))
        self.assert_refused(r, "GPUMEMSHIM_HOST_THRESHOLD", "12Q")

    def test_bad_value_through_env_flag(self):
        r = gms("run", "--env", "GPUMEMSHIM_LOG=shout", "--", "sh", "-c", "echo started")
        self.assert_refused(r, "GPUMEMSHIM_LOG", "shout")

    def test_stats_file_in_missing_directory(self):
        r = gms("run", "--stats=/nonexistent-dir-gms/s.json", "--", "sh", "-c", "echo started")
        self.assert_refused(r, "GPUMEMSHIM_STATS", "/nonexistent-dir-gms")

    def test_one_line_per_bad_value(self):
        r = gms("run", "--policy", "bogus", "--", "true")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    @child_under_shim
    def test_every_option_has_a_flag(self):
        # Each option's flag, given the option's default (which the shim must accept), reaches the child.
        for variable, default in option_defaults_from_def():
            if variable == "GPUMEMSHIM_STATS":
                continue  # its own form, tested below
            with self.subTest(variable=variable):
                r = gms("run", flag_of(variable), default, "--", "sh", "-c", 'printf "%s" "$' + variable + '"')
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, default)
                r = gms("run", flag_of(variable) + "=" + default, "--", "sh", "-c", 'printf "%s" "$' + variable + '"')
                self.assertEqual((r.returncode, r.stdout), (0, default), r.stderr)

    @child_under_shim
    def test_limit_is_short_for_device_limit(self):
        if "GPUMEMSHIM_DEVICE_LIMIT" not in dict(option_defaults_from_def()):
            self.skipTest("no DEVICE_LIMIT option in this build")
        r = gms("run", "--limit", "8G", "--", "sh", "-c", "echo $GPUMEMSHIM_DEVICE_LIMIT")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "8G"), r.stderr)
        self.assertIn("--limit", gms("run", "--limit", "lots", "--", "true").stderr)

    def test_separator_is_never_a_value(self):
        r = gms("run", "--log", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--log needs a value", r.stderr)

    @child_under_shim
    def test_flags_set_the_variables(self):
        show = 'echo "$GPUMEMSHIM_POLICY|$GPUMEMSHIM_LOG|$GPUMEMSHIM_STATS|$FOO"'
        r = gms("run", "--policy", "off", "--log=info", "--stats", "--env", "FOO=a=b", "--", "sh", "-c", show)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "off|info|text|a=b")

    @child_under_shim
    def test_stats_file_is_made_absolute(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([TOOL, "run", "--stats=s-%p.json", "--", "sh", "-c", "echo $GPUMEMSHIM_STATS"],
                               cwd=d, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), os.path.join(os.path.realpath(d), "s-%p.json"))

    @child_under_shim
    def test_stats_keywords_pass_through(self):
        r = gms("run", "--stats=json", "--", "sh", "-c", "echo $GPUMEMSHIM_STATS")
        self.assertEqual(r.stdout.strip(), "json", r.stderr)

    @child_under_shim
    def test_flag_overrides_bad_environment_value(self):
        # The child sees only the flag's value, so the environment's bad one does not matter.
        r = gms("run", "--log", "info", "--", "sh", "-c", "echo $GPUMEMSHIM_LOG",
                env=clean_env(GPUMEMSHIM_LOG="loud"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "info")

    @child_under_shim
    def test_valid_environment_is_passed_on(self):
        r = gms("run", "--", "sh", "-c", "echo $GPUMEMSHIM_HOST_THRESHOLD",
                env=clean_env(GPUMEMSHIM_HOST_THRESHOLD="4M"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "4M")


class RunChildTest(unittest.TestCase):
    """The child runs with the shim preloaded and its exit status comes back."""

    @child_under_shim
    def test_exit_status_zero(self):
        self.assertEqual(gms("run", "--", "true").returncode, 0)

    @child_under_shim
    def test_exit_status_three(self):
        self.assertEqual(gms("run", "--", "sh", "-c", "exit 3").returncode, 3)

    @child_under_shim
    def test_child_killed_by_sigterm(self):
        r = gms("run", "--", "sh", "-c", "kill -TERM $$")
        self.assertEqual(r.returncode, 128 + signal.SIGTERM, r.stderr)

    @child_under_shim
    def test_arguments_reach_the_child_unchanged(self):
        r = gms("run", "--", "sh", "-c", 'printf "%s|" "$@"', "sh", "a b", "--policy", "")
        self.assertEqual(r.stdout, "a b|--policy||")

    @child_under_shim
    def test_ld_preload_is_the_shim(self):
        r = gms("run", "--", "sh", "-c", "echo $LD_PRELOAD")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(preload_entries(r.stdout), [os.path.realpath(SHIM)])

    @child_under_shim
    def test_ld_preload_is_prepended(self):
        # Real libraries, so that ld.so has nothing to complain about; space separated on purpose.
        others = [p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libdl.so.2")
                  if os.path.exists(p)] or ["libm.so.6"]
        existing = " ".join(others)
        r = gms("run", "--", "sh", "-c", "echo $LD_PRELOAD", env=clean_env(LD_PRELOAD=existing))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(preload_entries(r.stdout), [os.path.realpath(SHIM)] + others)

    @child_under_shim
    def test_another_copy_of_the_shim_is_replaced(self):
        with tempfile.TemporaryDirectory() as d:
            old = os.path.join(d, "libgpumemshim.so")
            shutil.copy(SHIM, old)
            r = gms("run", "--", "sh", "-c", "echo $LD_PRELOAD", env=clean_env(LD_PRELOAD=old))
            self.assertEqual(preload_entries(r.stdout), [os.path.realpath(SHIM)], r.stderr)

    def test_missing_command(self):
        r = gms("run", "--", "/nonexistent/gms-no-such-command", "x")
        self.assertEqual(r.returncode, 127)
        self.assertIn("cannot execute '/nonexistent/gms-no-such-command'", r.stderr)
        self.assertIn("No such file", r.stderr)

    def test_missing_command_on_path(self):
        r = gms("run", "--", "gms-no-such-command-on-path")
        self.assertEqual(r.returncode, 127)
        self.assertIn("gms-no-such-command-on-path", r.stderr)

    @child_under_shim
    def test_command_found_through_path(self):
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "gms-test-script")
            with open(script, "w") as f:
                f.write("#!/bin/sh\nexit 5\n")
            os.chmod(script, 0o755)
            env = clean_env(PATH=d + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
            self.assertEqual(gms("run", "--", "gms-test-script", env=env).returncode, 5)

    def start_waiting_child(self):
        p = subprocess.Popen([TOOL, "run", "--", "sh", "-c", "echo ready; exec sleep 30"],
                             env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        return p

    def check_forwarded(self, sig):
        if signal.getsignal(sig) == signal.SIG_IGN:
            # Inherited as ignored (nohup, a background job): the child ignores it too, by design.
            self.skipTest("signal %d is ignored in this test's environment" % sig)
        p = self.start_waiting_child()
        try:
            p.send_signal(sig)
            self.assertEqual(p.wait(timeout=20), 128 + sig)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()

    @child_under_shim
    def test_sigterm_is_forwarded(self):
        self.check_forwarded(signal.SIGTERM)

    @child_under_shim
    def test_sigint_is_forwarded(self):
        self.check_forwarded(signal.SIGINT)

    @child_under_shim
    def test_sighup_is_forwarded(self):
        self.check_forwarded(signal.SIGHUP)

    def test_shim_not_found(self):
        with tempfile.TemporaryDirectory() as d:
            lonely = os.path.join(d, "bin", "gpumemshim")
            os.mkdir(os.path.dirname(lonely))
            shutil.copy(TOOL, lonely)
            r = gms("run", "--", "sh", "-c", "echo started", tool=lonely)
            self.assertEqual(r.returncode, 2)
            self.assertEqual(r.stdout, "")
            self.assertIn("cannot find libgpumemshim.so", r.stderr)


class UsageTest(unittest.TestCase):
    def test_no_arguments(self):
        r = gms()
        self.assertEqual(r.returncode, 2)
        self.assertIn("Usage: gpumemshim", r.stderr)

    def test_unknown_subcommand(self):
        r = gms("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("frobnicate", r.stderr)
        self.assertIn("Usage: gpumemshim", r.stderr)

    def test_run_without_separator(self):
        r = gms("run", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--", r.stderr)

    def test_run_without_command(self):
        for args in (["run"], ["run", "--"], ["run", "--policy", "off"], ["run", "--policy"]):
            r = gms(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("gpumemshim run:", r.stderr)

    def test_run_unknown_option(self):
        r = gms("run", "--frob", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--frob", r.stderr)

    def test_help_everywhere(self):
        for args in (["--help"], ["-h"], ["help"], ["run", "--help"], ["run", "-h"], ["doctor", "--help"],
                     ["doctor", "-h"], ["options", "--help"], ["options", "-h"], ["help", "run"]):
            r = gms(*args)
            self.assertEqual(r.returncode, 0, args)
            self.assertIn("Usage: gpumemshim", r.stdout, args)

    def test_run_help_lists_accepted_forms_from_the_table(self):
        r = gms("run", "--help")
        self.assertIn("quiet|error|warn|info|debug", r.stdout)

    def test_version(self):
        r = gms("--version")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout.strip(), "gpumemshim " + VERSION)


def driver_loadable():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


class DoctorTest(unittest.TestCase):
    def test_reports_build_facts(self):
        r = gms("doctor")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("gpumemshim " + VERSION, r.stdout)
        self.assertIn("libunwind:", r.stdout)
        self.assertIn(os.path.realpath(SHIM), r.stdout)
        self.assertIn("CUDA runtime", r.stdout)
        self.assertIn("CUPTI", r.stdout)

    @unittest.skipIf(driver_loadable(), "this machine has an NVIDIA driver")
    def test_no_driver_is_said_plainly(self):
        r = gms("doctor")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no NVIDIA driver found (libcuda.so.1 not loadable): this machine has no usable GPU",
                      r.stdout)

    @unittest.skipIf(not driver_loadable(), "no NVIDIA driver here")
    def test_driver_facts(self):
        r = gms("doctor")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("driver version:", r.stdout)

    @unittest.skipIf(not os.environ.get("GMS_FAKE_CUDA_DIR"), "no stand-in libcuda in this build")
    def test_every_gpu_fact_over_the_stand_in_driver(self):
        env = clean_env(LD_LIBRARY_PATH=os.environ["GMS_FAKE_CUDA_DIR"])
        r = gms("doctor", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("driver version:", r.stdout)
        self.assertRegex(r.stdout, r"GPUs: +[1-9]")
        for label in ("GPU 0:", "total memory:", "compute capability:", "concurrentManagedAccess:",
                      "pageableMemoryAccess:", "PCI bus id:", "PCIe link:"):
            self.assertIn(label, r.stdout)

    def test_flags_bad_environment_values(self):
        r = gms("doctor", env=clean_env(GPUMEMSHIM_LOG="loud"))
        self.assertEqual(r.returncode, 0)
        self.assertIn("INVALID: GPUMEMSHIM_LOG='loud'", r.stdout)

    @child_under_shim
    def test_runs_without_the_shim_even_when_preloaded(self):
        # doctor re-executes itself without the shim. With LD_DEBUG=files the loader reports each
        # program image it starts and each library it initialises: two images, one shim.
        r = gms("doctor", env=clean_env(LD_PRELOAD=os.path.realpath(SHIM), LD_DEBUG="files"))
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stderr.count("initialize program:"), 2, "doctor did not re-execute itself")
        opened = re.findall(r"calling init: \S*libgpumemshim\.so", r.stderr)
        self.assertEqual(len(opened), 1, "the shim was loaded again after re-execution")

    def test_rejects_arguments(self):
        self.assertEqual(gms("doctor", "--frob").returncode, 2)


# A child that makes two CUDA calls the trace records (an allocation and its free), through ctypes
# and the stand-in libcuda.so.1 (so dlsym: the shim's hooks).
CUDA_CHILD = """
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0
assert cu.cuMemFree_v2(ptr) == 0
"""


class RunTraceTest(unittest.TestCase):
    """--trace FILE [--faults]: the path made absolute, its directory checked first, and one closing
    line naming the trace files the run wrote."""

    def run_in(self, d, *args, env=None):
        return subprocess.run([TOOL, "run", *args], cwd=d, env=env or clean_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)

    @child_under_shim
    def test_relative_path_is_made_absolute_and_faults_is_a_switch(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_in(d, "--trace", "t-%p.jsonl", "--faults", "--", "sh", "-c",
                            'echo "$GPUMEMSHIM_TRACE|$GPUMEMSHIM_TRACE_FAULTS"')
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), os.path.join(os.path.realpath(d), "t-%p.jsonl") + "|1")
            self.assertNotIn("trace written", r.stderr, "sh made no CUDA call: there is no trace")

    def test_missing_directory_is_refused_before_the_start(self):
        r = gms("run", "--trace", "/nonexistent-dir-gms/t.jsonl", "--", "sh", "-c", "echo started")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, "")
        self.assertIn("GPUMEMSHIM_TRACE", r.stderr)
        self.assertIn("/nonexistent-dir-gms", r.stderr)

    def test_bad_pattern_is_refused(self):
        r = gms("run", "--trace", "t-%q.jsonl", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--trace", r.stderr)

    @child_under_shim
    @unittest.skipIf(not os.environ.get("GMS_FAKE_CUDA_DIR"), "no stand-in libcuda in this build")
    def test_closing_line_names_the_trace(self):
        with tempfile.TemporaryDirectory() as d:
            d = os.path.realpath(d)
            env = clean_env(LD_LIBRARY_PATH=os.environ["GMS_FAKE_CUDA_DIR"])
            r = self.run_in(d, "--trace", "t-%p.jsonl", "--", sys.executable, "-c", CUDA_CHILD, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            files = [f for f in os.listdir(d) if f.endswith(".jsonl")]
            self.assertEqual(len(files), 1, files)
            path = os.path.join(d, files[0])
            lines = [l for l in r.stderr.splitlines() if "trace written" in l]
            # The allocation, made movable memory by the default policy (auto: a decision), and the
            # free, each followed by the device budget's use; call sites are descriptions, not events.
            with open(path) as f:
                types = [json.loads(l)["type"] for l in f]
            self.assertEqual([t for t in types if t != "site"], ["header", "alloc", "decision", "budget", "free", "budget", "end"])
            self.assertEqual(lines, [f"gpumemshim: trace written to {path} (5 events); see it with: "
                                     f"gpumemshim report {path}  (--html report.html for plots)"], r.stderr)
            # Files of earlier runs that the pattern also matches are not this run's.
            old = os.path.join(d, "t-1.jsonl")
            with open(old, "w") as f:
                f.write("{}\n")
            for f in (old, path):
                os.utime(f, (1, 1))
            r = self.run_in(d, "--trace", "t-%p.jsonl", "--", sys.executable, "-c", CUDA_CHILD, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("t-1.jsonl", r.stderr)
            self.assertNotIn(path, r.stderr)
            self.assertIn("gpumemshim: trace written to", r.stderr)


class OptionsTest(unittest.TestCase):
    def test_text_lists_every_option(self):
        r = gms("options")
        self.assertEqual(r.returncode, 0)
        for name in option_names_from_def():
            self.assertIn(name, r.stdout)

    def test_markdown_lists_every_option(self):
        r = gms("options", "--markdown")
        self.assertEqual(r.returncode, 0)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "| Variable | Default | Accepted | What it does |")
        self.assertRegex(lines[1], r"^\|(\s*-+\s*\|){4}$")
        names = option_names_from_def()
        self.assertTrue(names, "no option found in options.def")
        self.assertEqual(len(lines), 2 + len(names))
        for name, row in zip(names, lines[2:]):
            self.assertTrue(row.startswith("| `%s` |" % name), row)
            # Four cells: escaped pipes inside a cell do not count as separators.
            self.assertEqual(len(re.findall(r"(?<!\\)\|", row)), 5, row)

    def test_unknown_option(self):
        self.assertEqual(gms("options", "--html").returncode, 2)


class ReadmeOptionsTest(unittest.TestCase):
    """README.md's options table is the command's output, so it cannot drift from options.def."""

    HOW = ("regenerate it with `gpumemshim options --markdown` (in the build tree: "
           "build/tools/gpumemshim options --markdown) and paste the output into README.md between the "
           "lines '%s' and '%s'" % (MARK_BEGIN, MARK_END))

    def test_readme_table_matches(self):
        readme = os.path.join(SOURCE_DIR, "README.md")
        if not os.path.exists(readme):
            self.fail("README.md does not exist at the repository root; " + self.HOW)
        with open(readme) as f:
            text = f.read()
        if MARK_BEGIN not in text or MARK_END not in text:
            self.fail("README.md lacks the markers of the options table; " + self.HOW)
        inside = text.split(MARK_BEGIN, 1)[1].split(MARK_END, 1)[0]
        expected = gms("options", "--markdown").stdout
        # Blank lines around the table are allowed (Markdown likes them); the table itself is exact.
        self.assertEqual(inside.strip("\n"), expected.strip("\n"), "README.md's options table is stale; " + self.HOW)


class InstallTest(unittest.TestCase):
    """An installed prefix works on its own: bin/gpumemshim finds lib/libgpumemshim.so."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gms-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        r = subprocess.run([CMAKE, "--install", BUILD_DIR, "--prefix", cls.prefix],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        cls.install_log = r.stdout
        cls.install_rc = r.returncode
        cls.tool = os.path.join(cls.prefix, "bin", "gpumemshim")
        cls.lib = os.path.join(cls.prefix, "lib", "libgpumemshim.so")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_layout(self):
        self.assertEqual(self.install_rc, 0, self.install_log)
        self.assertTrue(os.access(self.tool, os.X_OK), self.install_log)
        self.assertTrue(os.path.isfile(self.lib), self.install_log)

    @child_under_shim
    def test_installed_command_finds_installed_library(self):
        r = gms("run", "--", "sh", "-c", "echo $LD_PRELOAD", tool=self.tool)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(preload_entries(r.stdout), [os.path.realpath(self.lib)])

    @child_under_shim
    def test_installed_command_runs_a_child(self):
        r = gms("run", "--", "sh", "-c", "exit 3", tool=self.tool)
        self.assertEqual(r.returncode, 3, r.stderr)

    def test_installed_doctor(self):
        r = gms("doctor", tool=self.tool)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(os.path.realpath(self.lib), r.stdout)


if __name__ == "__main__":
    if not TOOL or not os.access(TOOL, os.X_OK):
        sys.exit("GMS_TOOL must name the gpumemshim executable (CTest sets it)")
    unittest.main()
