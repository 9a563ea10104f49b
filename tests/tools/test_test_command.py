#!/usr/bin/env python3
"""tools/test.sh's pieces: its summary line over ctest's JUnit reports (tools/test_summary.py), and
the build settings it relies on (warnings are errors there, not in users' builds).

    GMS_SOURCE_DIR=. python3 tests/tools/test_test_command.py -v
"""
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get("GMS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SUMMARY = os.path.join(SOURCE_DIR, "tools", "test_summary.py")

# What ctest --output-junit writes (CMake 3.25): status run / fail / notrun.
CASE = '<testcase name="{0}" classname="{0}" time="0.1" status="{1}">{2}</testcase>'


def junit(path, cases):
    body = "".join(CASE.format(name, status, {"fail": '<failure message=""/>',
                                              "notrun": '<skipped message="SKIP_RETURN_CODE=77"/>'}.get(status, ""))
                   for name, status in cases)
    with open(path, "w") as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="x" tests="{len(cases)}">{body}</testsuite>\n')


def summary(*args):
    return subprocess.run([sys.executable, SUMMARY, *args], capture_output=True, text=True, timeout=60)


class TestSummaryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gms-summary-")

    def test_counts_every_build(self):
        a, b = os.path.join(self.tmp, "a.xml"), os.path.join(self.tmp, "b.xml")
        junit(a, [("unit", "run"), ("preload.trace", "fail"), ("gpu", "notrun")])
        junit(b, [("unit", "run"), ("preload.trace", "run"), ("gpu", "notrun")])
        r = summary(a, b)
        self.assertEqual(r.stdout, "3 passed, 1 failed, 2 skipped\n")
        self.assertEqual(r.returncode, 1)
        r = summary(b)
        self.assertEqual((r.stdout, r.returncode), ("2 passed, 0 failed, 1 skipped\n", 0))

    def test_a_broken_build_or_a_missing_report_is_a_failure(self):
        b = os.path.join(self.tmp, "b.xml")
        junit(b, [("unit", "run")])
        r = summary("--broken", "2", b)
        self.assertEqual((r.stdout, r.returncode), ("1 passed, 2 failed, 0 skipped\n", 1))
        r = summary(b, os.path.join(self.tmp, "missing.xml"))
        self.assertEqual((r.stdout.splitlines()[-1], r.returncode), ("1 passed, 1 failed, 0 skipped", 1))
        self.assertIn("cannot read", r.stderr)


class BuildSettingsTest(unittest.TestCase):
    """Users' builds allow warnings; the project's test command makes them errors, and builds the
    Release and Debug configurations users make."""

    def read(self, *path):
        with open(os.path.join(SOURCE_DIR, *path)) as f:
            return f.read()

    def test_warnings_are_errors_only_in_the_test_command(self):
        self.assertRegex(self.read("CMakeLists.txt"), r'option\(GMS_WERROR "[^"]*" OFF\)')
        test_sh = self.read("tools", "test.sh")
        self.assertIn("-DGMS_WERROR=ON", test_sh)
        self.assertRegex(test_sh, r"for type in Release Debug")
        self.assertIn("test_summary.py", test_sh.strip().splitlines()[-1])


if __name__ == "__main__":
    unittest.main()
