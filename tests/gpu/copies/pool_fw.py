"""Device-to-host copies into new host buffers again and again, as programs do them: PyTorch's
.cpu(), CuPy's asnumpy, numba's copy_to_host, each 20 times for a 40 MB array, and (with
--fork) a fork child that reads a host buffer the shim may have registered. Prints one line per
framework with a checksum of every result, so stdout must be identical with and without the shim.
Usage: pool_fw.py [torch|cupy|numba|fork]..."""
import hashlib
import os
import sys

import numpy as np

np.row_stack = np.vstack
N = 10_000_000  # float32: 40 MB
REPS = 20


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def run_torch():
    import torch
    g = torch.arange(N, dtype=torch.float32, device="cuda")
    out = []
    for i in range(REPS):
        h = (g + i).cpu()
        out.append(h.numpy()[::9973].copy())
    x = torch.from_numpy(np.arange(N, dtype=np.float32))
    back = x.to("cuda", non_blocking=True).cpu()
    out.append(back.numpy()[::9973].copy())
    return digest(out)


def run_cupy():
    import cupy as cp
    g = cp.arange(N, dtype=cp.float32)
    out = []
    for i in range(REPS):
        h = cp.asnumpy(g + i)
        out.append(h[::9973].copy())
    return digest(out)


def run_numba():
    from numba import cuda
    g = cuda.to_device(np.arange(N, dtype=np.float32))
    out = []
    for i in range(REPS):
        h = g.copy_to_host()
        out.append((h[::9973] + i).copy())
    return digest(out)


def run_fork():
    """The parent copies through a host buffer (registered by the shim: pinned pages), then forks:
    the child must read the data and may write its own copy; the parent's data stays."""
    import torch
    h = np.empty(N, dtype=np.float32)
    h[:] = np.arange(N, dtype=np.float32)
    t = torch.from_numpy(h)
    for _ in range(3):
        d = t.to("cuda")
        t.copy_(d * 2)
    torch.cuda.synchronize()
    expect = float(h[::9973].sum())
    pid = os.fork()
    if pid == 0:
        ok = float(h[::9973].sum()) == expect
        h[:] = -1  # the child's copy-on-write pages, never the parent's
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    return f"child={os.waitstatus_to_exitcode(status)} parent_intact={float(h[::9973].sum()) == expect}"


def main():
    for what in sys.argv[1:] or ["torch", "cupy", "numba"]:
        print(what, globals()[f"run_{what}"](), flush=True)


if __name__ == "__main__":
    main()
