"""Scenario S3 (SCENARIOS.md): c = a * b for three float64 arrays of ROWS x 500, the numba way.

  s3_numba.py plain [ROWS]   the unmodified program: cuda.to_device of all three, one kernel,
                             copy_to_host; run it under the shim with a device limit to see spill
  s3_numba.py chunked [ROWS] the expert rewrite, the anchor: host arrays in pinned memory from the
                             start, three streams, a free list of device buffers, the copies of one
                             chunk overlapping the kernel of another
  s3_numba.py managed [ROWS] the managed-memory way, no hints: cuda.managed_array written on the
                             CPU, the kernel faults pages over, the CPU reads the result back
                             (fault-driven migration both ways; 12 GB of managed memory)
Prints one JSON line: mode, seconds (JIT excluded: compiled on a small input first), checksum, or
the error the program died of (out of memory).
"""
import json
import sys
import time

import numpy as np

np.row_stack = np.vstack  # numba-cuda on the test machine still calls it
from numba import cuda  # noqa: E402

COLS = 500


@cuda.jit
def mul(a, b, c):
    i, j = cuda.grid(2)
    if i < c.shape[0] and j < c.shape[1]:
        c[i, j] = a[i, j] * b[i, j]


def launch(a, b, c, stream=0):
    threads = (8, 64)
    blocks = ((c.shape[0] + 7) // 8, (c.shape[1] + 63) // 64)
    mul[blocks, threads, stream](a, b, c)


def make(rows, pinned=False, managed=False):
    if managed:
        new = lambda: cuda.managed_array((rows, COLS))  # noqa: E731
    else:
        new = (lambda: cuda.pinned_array((rows, COLS))) if pinned else (lambda: np.empty((rows, COLS)))
    a = new()
    b = new()
    a[:] = np.arange(COLS) * 0.5
    b[:] = (np.arange(rows) % 13)[:, None]
    return a, b


def plain(a, b):
    da = cuda.to_device(a)
    db = cuda.to_device(b)
    dc = cuda.to_device(np.empty_like(a))
    launch(da, db, dc)
    return dc.copy_to_host()


def managed(a, b):
    c = cuda.managed_array(a.shape)
    launch(a, b, c)
    cuda.synchronize()
    return np.array(c)  # the CPU reads every page: migrated back on its faults


def chunked(a, b, chunk_rows=50000, nstreams=3):
    # a and b are pinned (make(pinned=True)), and so is c: every copy is a direct async DMA.
    c = cuda.pinned_array(a.shape)
    streams = [cuda.stream() for _ in range(nstreams)]
    bufs = [dict(da=cuda.device_array((chunk_rows, COLS)), db=cuda.device_array((chunk_rows, COLS)),
                 dc=cuda.device_array((chunk_rows, COLS))) for _ in range(nstreams)]
    for k, start in enumerate(range(0, a.shape[0], chunk_rows)):
        s, buf = streams[k % nstreams], bufs[k % nstreams]
        end = min(start + chunk_rows, a.shape[0])
        n = end - start
        # Stream order makes a buffer's reuse safe: its previous chunk's copy-out is queued before.
        buf["da"][:n].copy_to_device(a[start:end], stream=s)
        buf["db"][:n].copy_to_device(b[start:end], stream=s)
        launch(buf["da"][:n], buf["db"][:n], buf["dc"][:n], s)
        buf["dc"][:n].copy_to_host(c[start:end], stream=s)
    for s in streams:
        s.synchronize()
    return c


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    run = {"plain": plain, "chunked": chunked, "managed": managed}[mode]
    small_a, small_b = make(1000, pinned=mode == "chunked", managed=mode == "managed")
    run(small_a, small_b)  # JIT and context set-up, not timed
    a, b = make(rows, pinned=mode == "chunked", managed=mode == "managed")
    t0 = time.time()
    try:
        c = run(a, b)
    except Exception as e:  # the unmodified program's fate under a device limit: report it
        print(json.dumps({"mode": mode, "rows": rows, "error": type(e).__name__, "message": str(e)[:200]}))
        return 3
    secs = time.time() - t0
    ok = bool(np.array_equal(c[::997], (a * b)[::997]))
    print(json.dumps({"mode": mode, "rows": rows, "gb": round(3 * a.nbytes / 1e9, 2), "seconds": round(secs, 3),
                      "checksum": float(c[::997].sum()), "correct": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
