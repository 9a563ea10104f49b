"""tests/gpu/zoo/ab_table.py (the table of ab.sh, two variants of the shim side by side) on run files
written here: the medians, B/A, whether the results agree, failed and left-out runs. No GPU needed."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu", "zoo", "ab_table.py")


def table(files, rows):
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        out = subprocess.run([sys.executable, SCRIPT, d, rows], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout


def line(out, row):
    return next(l for l in out.splitlines() if l.startswith(f"| {row} |")).split("|")[1:-1]


class AbTable(unittest.TestCase):
    def test_medians_ratio_and_agreement(self):
        stats = json.dumps({"timings_ns": {"swap_move_ns": 3_000_000_000, "swap_backing_ns": 500_000_000,
                                           "swap_remap_ns": 1_000_000_000, "swap_wait_ns": 250_000_000}})
        files = {}
        for n, (a, b) in enumerate([(250.0, 240.0), (270.0, 230.0), (260.0, 250.0)]):
            files[f"A-decode-8b-7658M-{n}.out"] = json.dumps({"token_ms": a, "digest": "d1"})
            files[f"B-decode-8b-7658M-{n}.out"] = json.dumps({"token_ms": b, "digest": "d1"})
            files[f"B-decode-8b-7658M-{n}.stats.json"] = stats
        cells = [c.strip() for c in line(table(files, "decode:8b:7658M"), "decode:8b:7658M")]
        self.assertEqual(cells[1:7], ["250.0, 270.0, 260.0", "240.0, 230.0, 250.0", "260.0", "240.0", "0.923", "yes"])
        self.assertEqual(cells[7:], ["", "3.00 (0.50, 1.00), 0.25"])

    def test_launch_work_when_the_build_counts_it(self):
        stats = json.dumps({"timings_ns": {"swap_move_ns": 0, "swap_backing_ns": 0, "swap_remap_ns": 0,
                                           "swap_wait_ns": 0, "launch_scan_ns": 400_000_000}})
        files = {"A-zoo-llama-80G-0.out": json.dumps({"step_ms": 80.0, "loss": 0.5}),
                 "A-zoo-llama-80G-0.stats.json": stats}
        cells = [c.strip() for c in line(table(files, "zoo:llama:80G"), "zoo:llama:80G")]
        self.assertEqual(cells[7], "0.00 (0.00, 0.00), 0.00; launches 0.40")

    def test_different_results_and_failed_runs_are_shown(self):
        files = {
            "A-zoo-vit-5G-0.out": json.dumps({"step_ms": 100.0, "loss": 5.48}),
            "B-zoo-vit-5G-0.out": json.dumps({"step_ms": 90.0, "loss": 5.49}),
            "B-zoo-vit-5G-1.out": "",  # the program died: no JSON line
            "left-out": "zoo:vit:5G A 1\n",
        }
        out = table(files, "zoo:vit:5G")
        cells = [c.strip() for c in line(out, "zoo:vit:5G")]
        self.assertEqual(cells[2], "90.0 (1 failed)")
        self.assertEqual(cells[5], "0.900")
        self.assertEqual(cells[6], "5.48; 5.49")
        self.assertIn("Left out for lack of time: zoo:vit:5G A 1", out)

    def test_a_bad_row_says_what_is_expected(self):
        out = table({}, "decode:8b")
        self.assertIn("not a row (KIND:MODEL:BUDGET", out)


if __name__ == "__main__":
    unittest.main()
