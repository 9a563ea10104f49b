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

    def test_statistics_path_is_never_followed_or_replaced(self):
        for kind in self.kinds():
            with self.subTest(kind=kind):
                d = self.tmpdir()
                intact = self.plant(d, "stats.json", kind)
                run = self.run_program("direct", env={"GPUMEMSHIM_STATS": os.path.join(d, "stats.json")}, timeout=60)
                lines = shim_lines(run)
                self.assertEqual(len(lines), 1, run.stderr)
                self.assertIn("cannot write statistics to GPUMEMSHIM_STATS=", lines[0])
                self.assertTrue(intact(), f"the {kind} at the path was changed")
                self.assertEqual([n for n in os.listdir(d) if ".tmp-" in n], [], "a temporary file was left")

    def test_trace_path_is_never_followed_or_replaced(self):
        for kind in self.kinds():
            with self.subTest(kind=kind):
                d = self.tmpdir()
                intact = self.plant(d, "trace.jsonl", kind)
                run = self.run_program("direct", env={"GPUMEMSHIM_TRACE": os.path.join(d, "trace.jsonl")}, timeout=60)
                lines = shim_lines(run)
                self.assertEqual(len(lines), 1, run.stderr)
                self.assertIn("the program runs untraced", lines[0])
                self.assertTrue(intact(), f"the {kind} at the path was changed")
                self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))
                self.assertEqual([n for n in os.listdir(d) if ".tmp-" in n], [], "a temporary file was left")

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


if __name__ == "__main__":
    base.main()
