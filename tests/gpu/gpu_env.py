#!/usr/bin/env python3
"""Is there a usable NVIDIA GPU here? Shared by test_gpu.py, run_gpu_tests.sh and bench/bench.py.

Run as a script: prints the reason and exits 1 when there is no usable GPU, exits 0 when there is.
"""
import ctypes
import glob
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gpu_unavailable_reason():
    """None when a GPU is usable, else why not, in a few words."""
    if not glob.glob("/dev/nvidia[0-9]*"):
        return "no /dev/nvidia* device node"
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"libcuda.so.1 cannot be loaded ({e})"
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"nvidia-smi -L did not run ({e})"
        if r.returncode != 0 or "GPU" not in r.stdout:
            return f"nvidia-smi -L failed (exit {r.returncode}): {(r.stdout + r.stderr).strip()[:200]}"
    rc = cuda.cuInit(0)
    if rc != 0:
        return f"cuInit failed with CUresult {rc}"
    count = ctypes.c_int(0)
    rc = cuda.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value < 1:
        return f"cuDeviceGetCount found no device (CUresult {rc}, count {count.value})"
    return None


def gpu_count():
    """How many GPUs the driver sees (0 when it cannot say)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    except OSError:
        return 0


def shim_path():
    """GMS_SHIM, or the shim of the default build."""
    return os.environ.get("GMS_SHIM") or os.path.join(build_dir(), "shim", "libgpumemshim.so")


def build_dir():
    """GMS_BUILD_DIR (the project's build directory), or build/ at the top of the repository."""
    return os.environ.get("GMS_BUILD_DIR") or os.path.join(REPO, "build")


def gpu_bin_dir():
    """Where tests/gpu/CMakeLists.txt puts the CUDA test programs."""
    return os.path.join(build_dir(), "tests", "gpu")


if __name__ == "__main__":
    reason = gpu_unavailable_reason()
    if reason:
        print(reason)
        sys.exit(1)
    print("GPU available")
