#!/usr/bin/env python3
"""PyTorch, CuPy and numba in one process, each used the way real programs use it, and sharing
memory with the others: what the per-framework scripts (fw_*.py) leave out on purpose.

Usage: fw_mix.py [PART ...]   runs the parts named (all by default) and prints a line for each:
                              its name and a digest of each array it computed

test_policies.py runs it without the shim and under every placement policy with a small device
budget, and requires byte-identical output. Every part is deterministic on one GPU: no TF32, cuDNN
in deterministic mode, no benchmark-chosen algorithms, inputs from NumPy's seeded generator, no
atomics whose order could change a float sum.

  torch_train   a small conv net (cuDNN convolutions, batch norm, cuBLAS) trained for 4 steps with
                SGD and momentum under PyTorch's caching allocator; the inputs are pinned tensors
                copied with non_blocking=True on a side stream, ordered by an event
  torch_graph   a CUDA graph captured with torch.cuda.graph (the allocator's private pool: memory
                made during capture) and replayed on new inputs
  torch_compiled  a function compiled by torch.compile (Triton kernels, launched by Triton's own
                launcher; skipped, and said so, where Triton is not installed)
  cupy          cuBLAS, cuFFT (its plan's work area), CUB reductions, an ElementwiseKernel and a
                RawKernel under CuPy's memory pool; a device-to-host copy into pinned memory on a
                non-blocking stream
  interop       a PyTorch tensor taken by CuPy through DLPack and by numba through
                __cuda_array_interface__, written by both in place, read back by PyTorch (CuPy asks
                the driver about the pointer when it imports it)
  numba         a numba.cuda kernel over device arrays, one made from a CuPy array
"""
import hashlib
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numpy as np  # noqa: E402

if not hasattr(np, "row_stack"):  # numba-cuda still names it; numpy 2.5 removed it
    np.row_stack = np.vstack

import torch  # noqa: E402
import cupy as cp  # noqa: E402
from numba import cuda  # noqa: E402


def digest(*arrays):
    """The first 16 hex digits of each array's SHA-256, so that a difference names the array."""
    return " ".join(hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16] for a in arrays)


def host(t):
    return t.detach().cpu().numpy()


def torch_train(rng):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(64 * 32 * 32, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    side = torch.cuda.Stream()
    losses = []
    for _ in range(4):
        x = torch.from_numpy(rng.standard_normal((64, 3, 64, 64), dtype=np.float32)).pin_memory()
        y = torch.from_numpy(rng.integers(0, 10, 64)).pin_memory()
        with torch.cuda.stream(side):
            xd, yd = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record()
        torch.cuda.current_stream().wait_event(ready)
        xd.record_stream(torch.cuda.current_stream())
        yd.record_stream(torch.cuda.current_stream())
        loss = torch.nn.functional.cross_entropy(net(xd), yd)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(host(loss))
    return digest(np.stack(losses), *(host(p) for p in net.parameters()), *(host(b) for b in net.buffers()))


def torch_graph(rng):
    dev = torch.device("cuda")
    w = torch.from_numpy(rng.standard_normal((1024, 1024), dtype=np.float32)).to(dev)
    static_in = torch.zeros(512, 1024, device=dev)
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):  # the warm-up on a side stream that torch.cuda.graph asks for
        for _ in range(2):
            torch.relu(static_in @ w).sum(dim=1)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        hidden = torch.relu(static_in @ w)  # made inside the capture, from the graph's pool
        static_out = (hidden * 0.5).sum(dim=1)
    outs = []
    for _ in range(3):
        static_in.copy_(torch.from_numpy(rng.standard_normal((512, 1024), dtype=np.float32)))
        graph.replay()
        outs.append(host(static_out))
    del graph, hidden, static_out
    return digest(*outs)


def torch_compiled(rng):
    try:
        import triton  # noqa: F401  torch.compile's GPU code generator
    except ImportError:
        return "skipped: no triton"

    @torch.compile
    def layer(x, w):
        return torch.relu(x @ w).sum(dim=1) * 0.5 + x[:, 0]

    dev = torch.device("cuda")
    x = torch.from_numpy(rng.standard_normal((512, 1024), dtype=np.float32)).to(dev)
    w = torch.from_numpy(rng.standard_normal((1024, 1024), dtype=np.float32)).to(dev)
    return digest(host(layer(x, w)), host(layer(w[:512], w)))


def cupy_part(rng):
    a = cp.asarray(rng.standard_normal((1024, 1024), dtype=np.float32))
    b = a @ a.T
    f = cp.fft.fft(a[:, :512].astype(cp.complex64), axis=1)
    col = b.sum(axis=0)
    scale = cp.ElementwiseKernel("float32 x, float32 k", "float32 y", "y = x * k + 1.0f", "gms_scale")
    c = scale(a, cp.float32(0.25))
    square = cp.RawKernel(r'''
extern "C" __global__ void gms_square(const float* x, float* y, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i];
}''', "gms_square")
    d = cp.empty_like(c)
    square(((c.size + 255) // 256,), (256,), (c, d, cp.int32(c.size)))
    stream = cp.cuda.Stream(non_blocking=True)  # does not wait for the null stream by itself
    stream.wait_event(cp.cuda.get_current_stream().record())
    pinned = cp.cuda.alloc_pinned_memory(d.nbytes)
    out = np.frombuffer(pinned, np.float32, d.size).reshape(d.shape)
    with stream:
        d.get(stream=stream, out=out)
    stream.synchronize()
    return digest(cp.asnumpy(b), cp.asnumpy(f), cp.asnumpy(col), out.copy())


@cuda.jit
def axpb(x, y, a, b):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + b


@cuda.jit
def add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0


def interop(rng):
    t = torch.from_numpy(rng.standard_normal(1 << 20, dtype=np.float32)).cuda()
    as_cupy = cp.from_dlpack(t)  # shares t's memory
    as_cupy *= 2.0
    cp.cuda.get_current_stream().synchronize()
    as_numba = cuda.as_cuda_array(t)  # shares it too
    add_one[(t.numel() + 255) // 256, 256](as_numba)
    cuda.synchronize()
    return digest(host(t))


def numba_part(rng):
    x = rng.standard_normal(1 << 21, dtype=np.float32)
    d_x = cuda.to_device(x)
    d_y = cuda.device_array_like(d_x)
    axpb[(x.size + 255) // 256, 256](d_x, d_y, np.float32(3.0), np.float32(1.0))
    from_cupy = cuda.as_cuda_array(cp.asarray(x[:4096]))
    d_z = cuda.device_array(4096, np.float32)
    axpb[16, 256](from_cupy, d_z, np.float32(-1.0), np.float32(0.5))
    return digest(d_y.copy_to_host(), d_z.copy_to_host())


def main():
    if not torch.cuda.is_available():
        sys.exit("fw_mix: torch.cuda.is_available() is False")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    parts = {"torch_train": torch_train, "torch_graph": torch_graph, "torch_compiled": torch_compiled,
             "cupy": cupy_part, "interop": interop, "numba": numba_part}
    wanted = sys.argv[1:] or list(parts)
    unknown = [w for w in wanted if w not in parts]
    if unknown:
        sys.exit(f"fw_mix: no part named {', '.join(unknown)}; the parts: {', '.join(parts)}")
    rng = np.random.default_rng(0)
    for name in wanted:
        print(name, parts[name](rng), flush=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
