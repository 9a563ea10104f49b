"""One-shot copies of numpy arrays through CuPy and numba: 1 GiB float32 each way, three times.
Prints one JSON line per measurement (GB/s) and a checksum."""
import json
import sys
import time

import numpy as np

np.row_stack = np.vstack


def timed(fn, inputs):
    """Seconds per GiB of fn over fresh inputs made beforehand: only the copies are timed."""
    fn(inputs[0])
    t0 = time.time()
    for x in inputs[1:]:
        out = fn(x)
    return (len(inputs) - 1) * (1 << 30) / (time.time() - t0) / 1e9, out


def main():
    which = sys.argv[1]
    n = (1 << 30) // 4
    if which == "cupy":
        import cupy as cp
        d = cp.arange(n, dtype=cp.float32)
        gb_in, _ = timed(cp.asarray, [np.arange(n, dtype=np.float32) for _ in range(4)])
        gb_out, h = timed(cp.asnumpy, [d] * 4)
        sync = cp.cuda.Device().synchronize
    else:
        from numba import cuda
        d = cuda.to_device(np.arange(n, dtype=np.float32))
        gb_in, _ = timed(cuda.to_device, [np.arange(n, dtype=np.float32) for _ in range(4)])
        gb_out, h = timed(lambda a: a.copy_to_host(), [d] * 4)
        sync = cuda.synchronize
    sync()
    print(json.dumps({"framework": which, "htod_gbps": round(gb_in, 2), "dtoh_gbps": round(gb_out, 2),
                      "checksum": float(h[::4096].sum())}))


if __name__ == "__main__":
    main()
