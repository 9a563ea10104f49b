"""PyTorch with expandable segments (its allocator builds memory with cuMemCreate and cuMemMap)
allocating three times the device budget in 128 MiB tensors. Prints a checksum of every tensor
(the same with and without the shim) and, on stderr, a line "peak beyond base MiB: N": the most
device memory the process held beyond what it held before its first tensor, as NVML sees the
device (from outside the shim's own bookkeeping, which NVML does not go through; "none" where
NVML is not there). The runner sets the budget and
PYTORCH_CUDA_ALLOC_CONF; GMS_TEST_BUDGET_MIB tells this script how much to make.
"""
import ctypes
import os
import sys


class _Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvml_used():
    """The bytes in use on the device, as NVML reports them (None where NVML is not there)."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    dev = ctypes.c_void_p()
    m = _Mem()
    if nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) != 0 or nvml.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(m)) != 0:
        return None
    return m.used


def main():
    import torch
    budget_mib = int(os.environ.get("GMS_TEST_BUDGET_MIB", "1024"))
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    base = nvml_used()
    peak = 0
    tensors = []
    n = 3 * budget_mib // 128
    for i in range(n):
        t = torch.arange(32 << 20, device="cuda", dtype=torch.float32).remainder_(7 + i)
        tensors.append(t)
        torch.cuda.synchronize()
        used = nvml_used()
        if used is not None and base is not None:
            peak = max(peak, used - base)
    for i, t in enumerate(tensors):
        t.mul_(2).add_(i)
    for i, t in enumerate(tensors):
        print(f"tensor {i} sum {float(t.double().sum()):.1f}")
    print(f"peak beyond base MiB: {peak >> 20 if base is not None else 'none'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
