#!/usr/bin/env python3
"""CuPy with its memory pools off: a known number of driver calls per iteration.

Usage: fw_cupy.py [iterations]   (see fw_common.py for the output and how test_gpu.py uses it)

With cupy.cuda.set_allocator(None) every ndarray is one cudaMalloc (cuMemAlloc), released with
cudaFree (cuMemFree) as soon as its last reference goes; set_pinned_memory_allocator(None) turns
off the pinned pool too (unused below, but no pinned block may be cached either). Per iteration:
  d_x = cupy.empty(n)    1 allocation
  d_x.set(x_host)        1 host-to-device copy from pageable memory (cudaMemcpyAsync on the
                         current stream; ndarray.set, unlike cupy.asarray, stages nothing through
                         pinned memory)
  d_y = d_x * 3          1 allocation, 1 kernel launch (float32 scalar: the result stays float32)
  d_y += 1               1 kernel launch, in place
  y = d_y.get()          1 device-to-host copy into a new pageable numpy array (+ stream sync)
  del d_x, d_y           2 frees
Deliberately absent: cupy.asarray / cupy.array of host data (a pinned staging buffer per call),
reductions and .item() (extra copies), anything that uses cuBLAS/cuRAND (workspaces).
"""
import gc
import hashlib
import sys

import fw_common
import numpy as np
import cupy

N_ELEMS = 1 << 19  # float32: 2 MiB per buffer


def main():
    iterations = fw_common.iterations_from_argv()
    cupy.cuda.set_allocator(None)
    cupy.cuda.set_pinned_memory_allocator(None)
    if cupy.cuda.runtime.getDeviceCount() < 1:
        sys.exit("fw_cupy: no CUDA device")
    base = np.arange(N_ELEMS, dtype=np.float32) * np.float32(0.001)
    three, one = np.float32(3.0), np.float32(1.0)
    digest = hashlib.sha256()
    for i in range(iterations):
        x_host = base + np.float32(i)  # pageable, contiguous
        d_x = cupy.empty(N_ELEMS, dtype=cupy.float32)
        d_x.set(x_host)
        d_y = d_x * three
        d_y += one
        y = d_y.get()
        del d_x, d_y
        gc.collect()
        digest.update(y.tobytes())
    cupy.cuda.runtime.deviceSynchronize()
    expected = fw_common.per_iteration(allocs=2, frees=2, htod=1, dtoh=1, launches=2, buffer_bytes=N_ELEMS * 4)
    fw_common.emit("cupy", iterations, digest, expected)


if __name__ == "__main__":
    main()
