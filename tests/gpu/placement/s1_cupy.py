"""Scenario S1 (SCENARIOS.md): memory-mapped .npy arrays bigger than the GPU, with CuPy.

  s1_cupy.py DIR [ROWS] [STEPS]
Writes four float32 files of ROWS x 512 into DIR (once), opens them with
np.load(mmap_mode='r+'), moves each to the GPU with cupy.asarray, then at every step a kernel reads
and writes every array. Prints one JSON line with the per-array sums (checked against the same
arithmetic done by numpy on the host) or the error the program died of.
"""
import json
import os
import sys
import time

import numpy as np

ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 1_048_576  # 2 GiB per file
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 3


def ensure_files(d):
    paths = [os.path.join(d, f"part{i}.npy") for i in range(4)]
    for i, p in enumerate(paths):
        if not os.path.exists(p):
            m = np.lib.format.open_memmap(p, mode="w+", dtype=np.float32, shape=(ROWS, 512))
            m[:] = (np.arange(512, dtype=np.float32) % 17) + i
            m.flush()
            del m
    return paths


def main():
    import cupy as cp

    paths = ensure_files(sys.argv[1])
    t0 = time.time()
    try:
        host = [np.load(p, mmap_mode="r+") for p in paths]
        dev = [cp.asarray(h) for h in host]
        for _ in range(STEPS):
            for x in dev:
                x *= 0.5
                x += 1.0
        sums = [float(x[::1009].astype(cp.float64).sum()) for x in dev]
        cp.cuda.Device().synchronize()
    except Exception as e:
        print(json.dumps({"error": type(e).__name__, "message": str(e)[:200]}))
        return 3
    secs = time.time() - t0
    expect = []
    for h in host:
        y = np.array(h[::1009], dtype=np.float32)
        for _ in range(STEPS):
            y *= np.float32(0.5)
            y += np.float32(1.0)
        expect.append(float(y.astype(np.float64).sum()))
    ok = all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(sums, expect))
    print(json.dumps({"gb": round(4 * host[0].nbytes / 1e9, 2), "seconds": round(secs, 2), "sums": sums,
                      "correct": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
