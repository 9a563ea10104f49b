#!/usr/bin/env python3
"""The last line of tools/test.sh: "N passed, N failed, N skipped" over the JUnit reports of ctest.

Usage: test_summary.py [--broken N] JUNIT.xml...
  --broken N   steps that failed without a test report (a build that did not compile, a fuzz
               finding): each counts as one failure.
Exit status: 0 when nothing failed, 1 otherwise.
"""
import argparse
import sys
import xml.etree.ElementTree as ET


def count(path):
    """(passed, failed, skipped) of one ctest JUnit report."""
    passed = failed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        status = case.get("status", "")
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failed += 1
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broken", type=int, default=0)
    parser.add_argument("reports", nargs="*")
    args = parser.parse_args()
    totals = [0, args.broken, 0]
    for path in args.reports:
        try:
            for i, n in enumerate(count(path)):
                totals[i] += n
        except (OSError, ET.ParseError) as exc:
            print(f"test_summary: cannot read {path}: {exc}", file=sys.stderr)
            totals[1] += 1
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main())
