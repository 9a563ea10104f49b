"""tests/gpu/zoo/bench.sh with four lanes, its zoo replaced by tests/tools/fake_zoo.py (no GPU): the
rows of policy auto past a budget run alone on the host, while the other runs of the lanes still
run side by side. GMS_BUILD_DIR: a build with the shim and the gpumemshim tool."""
import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "gpu", "zoo", "bench.sh")


class ZooLanes(unittest.TestCase):
    def test_auto_rows_run_alone(self):
        build = os.environ.get("GMS_BUILD_DIR", "")
        if not os.path.exists(os.path.join(build, "tools", "gpumemshim")):
            self.skipTest("GMS_BUILD_DIR has no gpumemshim tool")
        if os.environ.get("GMS_SANITIZE"):
            self.skipTest("sanitizer build: its shim is not preloadable into python (the plain build runs this)")
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "runs.log")
            env = dict(os.environ, OUT=os.path.join(d, "out"), FAKE_LOG=log, GPUS="4", STEPS="4", WARMUP="1",
                       ZOO=os.path.join(HERE, "fake_zoo.py"), GMS_BUILD_DIR=os.path.abspath(build))
            out = subprocess.run(["bash", BENCH], env=env, capture_output=True, text=True, timeout=280)
            self.assertEqual(out.returncode, 0, out.stderr[-2000:])
            with open(log) as f:
                runs = [(m, c, float(a), float(b)) for m, c, a, b in (line.split() for line in f)]
        alone = [r for r in runs if r[1].startswith("auto:") and r[1].count(":") == 1 and r[1] != "auto:-"]
        self.assertEqual(len(alone), 8, "two budgets for each of four models")
        for a in alone:
            beside = [r for r in runs if r is not a and r[2] < a[3] and a[2] < r[3]]
            self.assertEqual(beside, [], f"{a} ran beside others")
        others = [r for r in runs if r not in alone]
        overlapping = sum(1 for i, x in enumerate(others) for y in others[i + 1:] if x[2] < y[3] and y[2] < x[3])
        self.assertGreater(overlapping, 0, "the other runs of the lanes run at once")


if __name__ == "__main__":
    unittest.main()
