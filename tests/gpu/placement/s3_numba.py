"""Scenario S3 (SCENARIOS.md): c = a * b for three float64 arrays of ROWS x 500, the numba way.

  s3_numba.py plain [ROWS]   the unmodified program: cuda.to_device of all three, one kernel,
                             copy_to_host; run it under the shim with a device limit to see spill
  s3_numba.py chunked [ROWS] the expert rewrite, the anchor: pinned staging buffers, three streams,
                             the copies of one chunk overlapping the kernel of another
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


def make(rows):
    a = np.empty((rows, COLS))
    b = np.empty((rows, COLS))
    a[:] = np.arange(COLS) * 0.5
    b[:] = (np.arange(rows) % 13)[:, None]
    return a, b


def plain(a, b):
    da = cuda.to_device(a)
    db = cuda.to_device(b)
    dc = cuda.to_device(np.empty_like(a))
    launch(da, db, dc)
    return dc.copy_to_host()


def chunked(a, b, chunk_rows=20000, nstreams=3):
    c = np.empty_like(a)
    streams = [cuda.stream() for _ in range(nstreams)]
    bufs = []
    for _ in range(nstreams):
        bufs.append(dict(ha=cuda.pinned_array((chunk_rows, COLS)), hb=cuda.pinned_array((chunk_rows, COLS)),
                         hc=cuda.pinned_array((chunk_rows, COLS)), da=cuda.device_array((chunk_rows, COLS)),
                         db=cuda.device_array((chunk_rows, COLS)), dc=cuda.device_array((chunk_rows, COLS)),
                         pending=None))
    for k, start in enumerate(range(0, a.shape[0], chunk_rows)):
        i = k % nstreams
        s, buf = streams[i], bufs[i]
        if buf["pending"] is not None:  # the previous chunk of this stream: finish and store it
            s.synchronize()
            p0, p1 = buf["pending"]
            c[p0:p1] = buf["hc"][: p1 - p0]
        end = min(start + chunk_rows, a.shape[0])
        n = end - start
        buf["ha"][:n] = a[start:end]
        buf["hb"][:n] = b[start:end]
        buf["da"][:n].copy_to_device(buf["ha"][:n], stream=s)
        buf["db"][:n].copy_to_device(buf["hb"][:n], stream=s)
        launch(buf["da"][:n], buf["db"][:n], buf["dc"][:n], s)
        buf["dc"][:n].copy_to_host(buf["hc"][:n], stream=s)
        buf["pending"] = (start, end)
    for s, buf in zip(streams, bufs):
        s.synchronize()
        if buf["pending"] is not None:
            p0, p1 = buf["pending"]
            c[p0:p1] = buf["hc"][: p1 - p0]
    return c


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    small_a, small_b = make(1000)
    (plain if mode == "plain" else chunked)(small_a, small_b)  # JIT and context set-up, not timed
    a, b = make(rows)
    t0 = time.time()
    try:
        c = (plain if mode == "plain" else chunked)(a, b)
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
