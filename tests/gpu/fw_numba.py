#!/usr/bin/env python3
"""numba.cuda: a known number of driver calls per iteration.

Usage: fw_numba.py [iterations]   (see fw_common.py for the output and how test_gpu.py uses it)

numba allocates with cuMemAlloc directly and copies with cuMemcpyHtoD / cuMemcpyDtoH (synchronous
on stream 0). It frees lazily: a dead array's cuMemFree waits in the context's deferred
deallocation queue until enough have piled up, so each iteration flushes the queue itself
(cuda.current_context().deallocations.clear()). Per iteration:
  d_x = cuda.to_device(x_host)        1 allocation, 1 host-to-device copy from pageable memory
  d_y = cuda.device_array_like(d_x)   1 allocation
  axpb[blocks, 256](d_x, d_y, 3, 1)   1 kernel launch (device arrays only: no implicit transfer)
  y = d_y.copy_to_host()              1 device-to-host copy into a new pageable numpy array
  free both explicitly, flush          2 frees
Deliberately absent: passing host arrays to a kernel (numba would copy them both ways and
allocate), reductions, pinned/mapped arrays.
"""
import gc
import hashlib
import os
import sys

# numba queues frees and issues them once more than this many are pending (10 by default): on the
# H100 a run of 10 iterations freed 11 buffers and a run of 20 freed 33 (flushes at 11, 22, 33),
# whatever the script did. 0: every free is issued at once, so the per-iteration count is exact.
os.environ["NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT"] = "0"

import numpy as np

if not hasattr(np, "row_stack"):  # numba-cuda still names it; numpy 2.5 removed it
    np.row_stack = np.vstack

import fw_common  # noqa: E402
from numba import cuda  # noqa: E402

N_ELEMS = 1 << 19  # float32: 2 MiB per buffer
THREADS = 256


@cuda.jit
def axpb(x, y, a, b):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + b


def main():
    iterations = fw_common.iterations_from_argv()
    if not cuda.is_available():
        sys.exit("fw_numba: numba.cuda.is_available() is False")
    ctx = cuda.current_context()
    blocks = (N_ELEMS + THREADS - 1) // THREADS
    base = np.arange(N_ELEMS, dtype=np.float32) * np.float32(0.001)
    a, b = np.float32(3.0), np.float32(1.0)
    digest = hashlib.sha256()
    for i in range(iterations):
        x_host = base + np.float32(i)  # pageable, contiguous
        d_x = cuda.to_device(x_host)
        d_y = cuda.device_array_like(d_x)
        axpb[blocks, THREADS](d_x, d_y, a, b)
        y = d_y.copy_to_host()
        d_x.gpu_data.free()
        d_y.gpu_data.free()
        del d_x, d_y
        gc.collect()
        ctx.deallocations.clear()
        digest.update(y.tobytes())
    cuda.synchronize()
    expected = fw_common.per_iteration(allocs=2, frees=2, htod=1, dtoh=1, launches=1, buffer_bytes=N_ELEMS * 4)
    fw_common.emit("numba", iterations, digest, expected)


if __name__ == "__main__":
    main()
