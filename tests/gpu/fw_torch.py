#!/usr/bin/env python3
"""PyTorch with its caching allocator off: a known number of driver calls per iteration.

Usage: fw_torch.py [iterations]   (see fw_common.py for the output and how test_gpu.py uses it)

With PYTORCH_NO_CUDA_MEMORY_CACHING set, every CUDA tensor is one cudaMalloc (cuMemAlloc) and its
release one cudaFree (cuMemFree) (c10/cuda/CUDACachingAllocator.cpp: uncached_allocate and
uncached_delete). Per iteration:
  a = x_cpu.to('cuda')   1 allocation, 1 host-to-device copy from pageable memory
                         (copy_kernel_cuda -> memcpy_and_sync: cudaMemcpyAsync + stream sync)
  b = a * 3.0            1 allocation, 1 kernel launch (elementwise; the scalar is a kernel argument)
  b.add_(1.0)            1 kernel launch, in place
  out = b.cpu()          1 device-to-host copy into a new pageable CPU tensor (no CUDA allocation)
  del a, b               2 frees
Deliberately absent: .item(), reductions, printing CUDA tensors, pin_memory(), non_blocking copies:
they add synchronous copies, workspace allocations or host-allocator traffic whose count is not
part of what is tested here. Buffers are 2 MiB, so no allocator rounding could change byte counts.
"""
import gc
import hashlib
import os
import sys

os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"  # read once, when the allocator is first used

import fw_common  # noqa: E402
import torch  # noqa: E402

N_ELEMS = 1 << 19  # float32: 2 MiB per buffer


def main():
    iterations = fw_common.iterations_from_argv()
    if not torch.cuda.is_available():
        sys.exit("fw_torch: torch.cuda.is_available() is False")
    dev = torch.device("cuda")
    base = torch.arange(N_ELEMS, dtype=torch.float32) * 0.001  # on the CPU
    digest = hashlib.sha256()
    for i in range(iterations):
        x_cpu = base + float(i)  # CPU op: contiguous, pageable
        a = x_cpu.to(dev)
        b = a * 3.0
        b.add_(1.0)
        out = b.cpu()
        del a, b
        gc.collect()  # nothing should be left to a collector, but never let frees drift
        digest.update(out.numpy().tobytes())
    torch.cuda.synchronize()
    expected = fw_common.per_iteration(allocs=2, frees=2, htod=1, dtoh=1, launches=2, buffer_bytes=N_ELEMS * 4)
    fw_common.emit("torch", iterations, digest, expected)


if __name__ == "__main__":
    main()
