"""tests/gpu/zoo/token_time.py (where a decoding token's time goes) on small traces written here,
whose answers are known by construction: no GPU needed."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu", "zoo", "token_time.py")
MiB = 1 << 20


def run(events):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(json.dumps({"type": "header", "format": "gpumemshim-trace", "version": 1}) + "\n")
        for e in events:
            f.write(json.dumps(e) + "\n")
        path = f.name
    try:
        out = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True, timeout=60)
        return out.returncode, json.loads(out.stdout)
    finally:
        os.unlink(path)


def token(t0, length, kernels=(), copies=()):
    """One token range at t0 (ns) with kernels [(start, end)] and copies [(start, end, kind, bytes)]
    given relative to t0."""
    ev = [{"type": "range", "name": "token", "domain": "", "t": t0, "end": t0 + length}]
    ev += [{"type": "kernel", "t": t0 + a, "end": t0 + b, "name": "k", "stream": 7} for a, b in kernels]
    ev += [{"type": "memcpy", "t": t0 + a, "end": t0 + b, "copy_kind": k, "bytes": n, "stream": 9} for a, b, k, n in copies]
    return ev


class TokenTime(unittest.TestCase):
    def test_splits_each_token(self):
        # Each token: 100 us long; kernels 10-30 and 60-70 (30 us); a copy in 20-50 (overlapping a
        # kernel for 10 us: 20 us of it alone) of 64 MiB; a copy out 80-90 of 8 MiB; a small copy
        # (under 1 MiB) that does not count.
        events = []
        for k in range(8):
            events += token(1_000_000 * k, 100_000, kernels=[(10_000, 30_000), (60_000, 70_000)],
                            copies=[(20_000, 50_000, "htod", 64 * MiB), (80_000, 90_000, "dtoh", 8 * MiB),
                                    (92_000, 93_000, "htod", 4096)])
        rc, got = run(events)
        self.assertEqual(rc, 0, got)
        self.assertEqual(got["tokens"], 6)  # the first quarter (2 of 8) is warm-up
        self.assertEqual(got["token_ns"], 100_000)
        self.assertEqual(got["busy_ns"], 30_000)
        self.assertEqual(got["idle_copying_ns"], 30_000)  # 20 us of the copy in, 10 of the copy out
        self.assertEqual(got["idle_ns"], 70_000)
        self.assertEqual(got["copied_in"], 64 * MiB)
        self.assertEqual(got["copied_out"], 8 * MiB)

    def test_work_outside_the_tokens_is_not_counted(self):
        events = []
        for k in range(4):
            events += token(1_000_000 * k, 100_000, kernels=[(0, 50_000)])
            # Between tokens (prefill, the host's own work): a long kernel and a copy.
            events.append({"type": "kernel", "t": 1_000_000 * k + 200_000, "end": 1_000_000 * k + 900_000, "name": "k", "stream": 7})
            events.append({"type": "memcpy", "t": 1_000_000 * k + 200_000, "end": 1_000_000 * k + 300_000,
                           "copy_kind": "htod", "bytes": 64 * MiB, "stream": 9})
        rc, got = run(events)
        self.assertEqual(rc, 0, got)
        self.assertEqual(got["busy_ns"], 50_000)
        self.assertEqual(got["copied_in"], 0)

    def test_no_tokens_is_an_error(self):
        rc, got = run([{"type": "kernel", "t": 0, "end": 10, "name": "k", "stream": 7}])
        self.assertEqual(rc, 1)
        self.assertIn("no token ranges", got["error"])


if __name__ == "__main__":
    unittest.main()
