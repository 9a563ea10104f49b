#!/usr/bin/env python3
"""Writes the sample traces of this folder (gpumemshim trace format, version 1; shim/trace/FORMAT.md).

The traces are crafted by hand, in code: each models one situation of shared/SCENARIOS.md with the
rates measured on the project's H100 (PCIe gen5 x16), small enough to read. The .jsonl files are
committed; run this script again only to change them on purpose (then regenerate the golden files:
GMS_REGENERATE_GOLDEN=1 ctest -R tools.Report). The malformed ones are written verbatim at the end.

    python3 tests/tools/traces/make_traces.py
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
GiB = 1 << 30
MiB = 1 << 20
MS = 1_000_000
US = 1_000

# Kernel names as CUPTI records them: mangled C++ (the report demangles them).
VECTOR_ADD = "_Z10vector_addPKfS0_Pfm"  # vector_add(float const*, float const*, float*, unsigned long)
FILL_KERNEL = ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEv"
               "iT0_T1_")  # void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>

H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85029158912,
        "budget_bytes": 85029158912, "pcie_gen": 5, "pcie_width": 16}


def header(host="gpu-node-3", pid=4242, argv=("./s4_managed",), t0=1_000_000_000_000, wall="2026-11-21T20:30:00Z",
           policy="off", devices=(H100,), faults=True, rank=None, local_rank=None, **extra):
    h = {"type": "header", "format": "gpumemshim-trace", "version": 1, "host": host, "pid": pid}
    if rank is not None:
        h["rank"] = rank
        h["local_rank"] = local_rank
    h.update({"argv": list(argv), "t0_ns": t0, "wall_t0": wall, "driver_version": 13000, "cuda_version": 13000,
              "policy": policy, "devices": list(devices), "cupti": "ok", "faults": faults})
    h.update(extra)
    return h


def addr(a):
    return "0x%x" % a


class Trace:
    def __init__(self, head):
        self.lines = [head]

    def add(self, type_, **kw):
        ev = {"type": type_}
        ev.update(kw)
        self.lines.append(ev)
        return ev

    def end(self, dropped=0):
        self.add("end", t=max(int(e.get("end", e.get("t", 0))) for e in self.lines[1:]), events=len(self.lines) - 1,
                 dropped=dropped)

    def write(self, name, cut_last=0):
        text = "".join(json.dumps(line, separators=(", ", ": ")) + "\n" for line in self.lines)
        if cut_last:
            text = text[:-cut_last]
        with open(os.path.join(HERE, name), "w") as f:
            f.write(text)


def site(tr, id_, symbol, module="/home/ana/s4/s4_managed", offset="0x1a2b", caller="main"):
    tr.add("site", t=0, id=id_, frames=[
        {"module": "/usr/local/cuda/lib64/libcudart.so.13", "offset": "0x4c3f0", "symbol": "cudaMallocManaged"},
        {"module": module, "offset": offset, "symbol": symbol},
        {"module": module, "offset": "0x1100", "symbol": caller}])


def migrate(tr, rng, t, end, base, total, counter, cause, device=0, chunk=128 * MiB, faults_first=True,
            access="read"):
    """Moves `total` bytes from `base` between t and end in `chunk`s, GPU fault groups before each."""
    n = max(1, total // chunk)
    step = (end - t) // n
    for i in range(n):
        a = base + i * chunk
        s = t + i * step
        if faults_first and counter == "htod":
            tr.add("um", t=s, end=s + 2 * US, counter="gpu_fault", address=addr(a), bytes=0,
                   value=rng.randint(900, 1100), access=access, device=device)
        if faults_first and counter == "dtoh":
            # CUPTI's value for a CPU fault is the faulting instruction's address: one fault a record.
            tr.add("um", t=s, end=s, counter="cpu_fault", address=addr(a), bytes=0,
                   value=0x55D4C0000000 + 16 * rng.randint(28000, 32000), device=device)
        tr.add("um", t=s + 3 * US, end=s + step - 1 * US, counter=counter, address=addr(a), bytes=chunk,
               value=0, cause=cause, device=device)


def um_faults():
    """S4 without hints: 3 x 1 GiB managed, CPU-initialised, one kernel moves it all on faults."""
    rng = random.Random(4)
    tr = Trace(header())
    site(tr, 1, "init_inputs(float**, float**, unsigned long)", offset="0x1a2b")
    site(tr, 2, "init_output(float**, unsigned long)", offset="0x1c40")
    a, b, c = 0x7f2a40000000, 0x7f2a80000000, 0x7f2ac0000000
    tr.add("alloc", t=1 * MS, ptr=addr(a), bytes=GiB, device=0, api="cuMemAllocManaged", kind="managed",
           placement="passthrough", site=1)
    tr.add("alloc", t=1 * MS + 40 * US, ptr=addr(b), bytes=GiB, device=0, api="cuMemAllocManaged", kind="managed",
           placement="passthrough", site=1)
    tr.add("alloc", t=1 * MS + 80 * US, ptr=addr(c), bytes=GiB, device=0, api="cuMemAllocManaged", kind="managed",
           placement="passthrough", site=2)
    tr.add("alloc", t=2 * MS, ptr=addr(0x7f2b00000000), bytes=256 * MiB, device=0, api="cuMemAlloc", kind="device",
           placement="passthrough", site=2)
    # The kernel reads a and b and writes c: 3 GiB on GPU faults at about 6 GB/s (measured: 5.95).
    k0, k1 = 400 * MS, 400 * MS + 541 * MS
    tr.add("kernel", t=k0, end=k1, name=VECTOR_ADD, device=0,
           stream=7, correlation=101, grid=[262144, 1, 1], block=[1024, 1, 1])
    third = (k1 - k0) // 3
    migrate(tr, rng, k0 + 20 * US, k0 + third, a, GiB, "htod", "coherence")
    migrate(tr, rng, k0 + third, k0 + 2 * third, b, GiB, "htod", "speculative")
    migrate(tr, rng, k0 + 2 * third, k1 - 10 * US, c, GiB, "htod", "coherence", access="write")
    tr.add("um", t=k0 + 200 * MS, end=k0 + 200 * MS + 50 * US, counter="throttling", address=addr(b + 64 * MiB),
           bytes=0, value=0, device=0)
    # The CPU reads the result back: 1 GiB on CPU faults at about 1.5 GB/s.
    migrate(tr, rng, 960 * MS, 960 * MS + 700 * MS, c, GiB, "dtoh", "coherence", chunk=256 * MiB)
    for p, n in ((a, GiB), (b, GiB), (c, GiB), (0x7f2b00000000, 256 * MiB)):
        tr.add("free", t=1700 * MS, ptr=addr(p), bytes=n, api="cuMemFree" if n != GiB else "cuMemFree")
    tr.end()
    tr.write("um_faults.jsonl")


def um_prefetched():
    """The same program under GPUMEMSHIM_POLICY=spill: the shim prefetches before the launch."""
    rng = random.Random(5)
    h100 = dict(H100, budget_bytes=80 * 10**9)
    tr = Trace(header(pid=4250, policy="spill", devices=(h100,), t0=1_000_500_000_000, wall="2026-11-21T20:38:20Z"))
    site(tr, 1, "init_inputs(float**, float**, unsigned long)", offset="0x1a2b")
    site(tr, 2, "init_output(float**, unsigned long)", offset="0x1c40")
    a, b, c = 0x7f2a40000000, 0x7f2a80000000, 0x7f2ac0000000
    for i, (p, s) in enumerate(((a, 1), (b, 1), (c, 2))):
        tr.add("alloc", t=1 * MS + i * 40 * US, ptr=addr(p), bytes=GiB, device=0, api="cuMemAllocManaged",
               kind="managed", placement="passthrough", site=s)
    tr.add("budget", t=2 * MS, device=0, limit=80 * 10**9, used=0, resident=0)
    t = 400 * MS
    for i, p in enumerate((a, b, c)):
        tr.add("decision", t=t + i * 10 * US, what="prefetch", ptr=addr(p), bytes=GiB, device=0,
               reason="kernel argument fits the budget")
    # 3 GiB at 46 GB/s: about 70 ms, in 1 GiB prefetches.
    pf = 23 * MS
    for i, p in enumerate((a, b, c)):
        migrate(tr, rng, t + 50 * US + i * pf, t + 50 * US + (i + 1) * pf, p, GiB, "htod", "user_prefetch",
                chunk=256 * MiB, faults_first=False)
        tr.add("budget", t=t + (i + 1) * pf, device=0, limit=80 * 10**9, used=0, resident=(i + 1) * GiB)
    k0 = t + 3 * pf + 100 * US
    tr.add("kernel", t=k0, end=k0 + 2900 * US, name=VECTOR_ADD,
           device=0, stream=7, correlation=101, grid=[262144, 1, 1], block=[1024, 1, 1])
    migrate(tr, rng, 500 * MS, 500 * MS + 700 * MS, c, GiB, "dtoh", "coherence", chunk=256 * MiB)
    tr.add("budget", t=1200 * MS, device=0, limit=80 * 10**9, used=0, resident=2 * GiB)
    for p in (a, b, c):
        tr.add("free", t=1250 * MS, ptr=addr(p), bytes=GiB, api="cuMemFree")
    tr.add("budget", t=1251 * MS, device=0, limit=80 * 10**9, used=0, resident=0)
    tr.end()
    tr.write("um_prefetched.jsonl")


def copies():
    """S2 in PyTorch: a 40 MB tensor to the GPU 50 times from pageable memory, 50 times pinned, and
    .cpu() of a GPU tensor into new pageable memory; the shim registers a pinned staging block."""
    rng = random.Random(2)
    tr = Trace(header(pid=5120, argv=("python3", "s2_copies.py"), t0=2_000_000_000_000,
                      wall="2026-11-21T21:00:00.250Z", faults=False))
    tr.add("site", t=0, id=11, frames=[
        {"module": "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so", "offset": "0x2f1a0c",
         "symbol": "at::native::copy_kernel_cuda(at::TensorIterator&, bool)"},
        {"module": "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_python.so", "offset": "0x8812",
         "symbol": "THPVariable_to"}])
    tr.add("site", t=0, id=12, frames=[
        {"module": "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so", "offset": "0x2f1b44",
         "symbol": "at::native::_to_copy(pinned)"}])
    tr.add("site", t=0, id=13, frames=[
        {"module": "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so", "offset": "0x2f2010",
         "symbol": "at::native::_local_scalar_dense / .cpu()"}])
    dev = 0x7f5e00000000
    tr.add("alloc", t=5 * MS, ptr=addr(dev), bytes=40 * 10**6, device=0, api="cuMemAlloc", kind="device",
           placement="passthrough", site=11)
    tr.add("alloc", t=6 * MS, ptr=addr(0x7f7000000000), bytes=40 * 10**6, device=0, api="cuMemHostAlloc",
           kind="pinned_host", placement="passthrough", site=12)
    size = 40 * 10**6
    t = 10 * MS
    corr = 500
    # Pageable: 13.1 GB/s measured by PyTorch (the call on the host), the device copy a bit faster.
    for i in range(50):
        host = int(size / 13.1)
        dev_t = int(size / 14.4)
        tr.add("copy", t=t, api="cuMemcpyHtoDAsync_v2", bytes=size, dir="htod", host_kind="pageable", path="driver",
               dur_ns=host + rng.randint(-20, 20) * US, site=11)
        tr.add("memcpy", t=t + 30 * US, end=t + 30 * US + dev_t, bytes=size, copy_kind="htod", src_kind="pageable",
               dst_kind="device", device=0, stream=13, correlation=corr)
        corr += 1
        t += host + 200 * US
    # Pinned: 53.8 GB/s.
    for i in range(50):
        d = int(size / 53.8)
        tr.add("copy", t=t, api="cuMemcpyHtoDAsync_v2", bytes=size, dir="htod", host_kind="pinned", path="driver",
               dur_ns=d + 15 * US, site=12)
        tr.add("memcpy", t=t + 10 * US, end=t + 10 * US + d, bytes=size, copy_kind="htod", src_kind="pinned",
               dst_kind="device", device=0, stream=13, correlation=corr)
        corr += 1
        t += d + 100 * US
    # .cpu() into a new pageable tensor each time: 1.4 GB/s, first-touch page faults dominate.
    for i in range(10):
        d = int(size / 1.4)
        tr.add("copy", t=t, api="cuMemcpyDtoH_v2", bytes=size, dir="dtoh", host_kind="pageable", path="driver",
               dur_ns=d, site=13)
        tr.add("memcpy", t=t + 5 * MS, end=t + 5 * MS + int(size / 10.8), bytes=size, copy_kind="dtoh",
               src_kind="device", dst_kind="pageable", device=0, stream=0, correlation=corr)
        corr += 1
        t += d + 300 * US
    # The shim registering (pinning) a pageable block for reuse, then dropping it when it is freed.
    tr.add("register", t=t, ptr=addr(0x7f8000000000), bytes=64 * MiB, dur_ns=3700 * US, result="ok", why="auto")
    tr.add("copy", t=t + 4 * MS, api="cuMemcpyHtoD_v2", bytes=64 * MiB, dir="htod", host_kind="pageable",
           path="registered", dur_ns=int(64 * MiB / 53.0), site=11)
    tr.add("memcpy", t=t + 4 * MS + 10 * US, end=t + 4 * MS + 10 * US + int(64 * MiB / 54.9), bytes=64 * MiB,
           copy_kind="htod", src_kind="pinned", dst_kind="device", device=0, stream=13, correlation=corr)
    tr.add("register", t=t + 6 * MS, ptr=addr(0x7f9000000000), bytes=GiB, dur_ns=0, result="CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
           why="auto")
    tr.add("cache", t=t + 7 * MS, hits=49, misses=2, evictions=0, invalidations=1, bytes=64 * MiB)
    tr.add("unregister", t=t + 8 * MS, ptr=addr(0x7f8000000000), bytes=64 * MiB, dur_ns=1400 * US, why="free")
    tr.add("kernel", t=t + 9 * MS, end=t + 9 * MS + 180 * US, name=FILL_KERNEL,
           device=0, stream=13, correlation=corr + 1, grid=[39063, 1, 1], block=[128, 1, 1])
    tr.add("memset", t=t + 10 * MS, end=t + 10 * MS + 20 * US, bytes=40 * 10**6, device=0, stream=13)
    tr.add("free", t=t + 12 * MS, ptr=addr(dev), bytes=size, api="cuMemFree_v2")
    tr.end()
    tr.write("copies.jsonl")


def rank(r):
    """One rank of a two-rank torchrun job on one host under --policy spill --device-limit 8G: NVTX
    ranges per step, over-budget spills, prefetches and evictions; rank 1 thrashes a region."""
    rng = random.Random(10 + r)
    gpu = dict(H100, index=r, budget_bytes=8 * 10**9)
    t0 = 3_000_000_000_000 + r * 350 * MS  # rank 1 started 0.35 s later, on the same clock
    wall = "2026-11-21T22:00:00.100Z" if r == 0 else "2026-11-21T22:00:00.450Z"
    tr = Trace(header(pid=7000 + r, argv=("python3", "train.py", "--epochs", "1"), t0=t0, wall=wall, policy="spill",
                      devices=(gpu,), rank=r, local_rank=r, numa_node=r))  # numa_node: a key from a newer writer
    base = 0x7f4000000000 + r * 0x100000000
    spill = 0x7f6000000000 + r * 0x100000000
    t = 2 * MS
    tr.add("budget", t=t, device=r, limit=8 * 10**9, used=0, resident=0)
    used = 0
    for i in range(3):  # weights and activations: on the device, within the budget
        tr.add("alloc", t=t + i * 100 * US, ptr=addr(base + i * 0x40000000), bytes=2 * 10**9, device=r,
               api="cuMemAllocAsync", kind="device", placement="device")
        used += 2 * 10**9
        tr.add("budget", t=t + i * 100 * US + 1 * MS, device=r, limit=8 * 10**9, used=used, resident=0)
    # The optimizer state does not fit: spilled to managed memory.
    tr.add("decision", t=10 * MS, what="spill_managed", ptr=addr(spill), bytes=4 * 10**9, device=r,
           reason="over the device budget (8.0 GB)")
    tr.add("alloc", t=10 * MS + 5 * US, ptr=addr(spill), bytes=4 * 10**9, device=r, api="cuMemAllocAsync",
           kind="managed", placement="managed")
    tr.add("future_event", t=12 * MS, detail="a type this reader does not know")
    corr = 1000 * (r + 1)
    for step in range(3):
        s0 = 50 * MS + step * 400 * MS
        tr.add("range", t=s0, end=s0 + 380 * MS, name="step %d" % step, domain="train", tid=7100 + r)
        # A batch comes in from pinned memory.
        tr.add("copy", t=s0 + 1 * MS, api="cuMemcpyHtoDAsync_v2", bytes=256 * MiB, dir="htod", host_kind="pinned",
               path="driver", dur_ns=30 * US)
        tr.add("memcpy", t=s0 + 1 * MS + 20 * US, end=s0 + 1 * MS + 20 * US + int(256 * MiB / 54.9), bytes=256 * MiB,
               copy_kind="htod", src_kind="pinned", dst_kind="device", device=r, stream=7, correlation=corr)
        corr += 1
        f0 = s0 + 10 * MS
        tr.add("range", t=f0, end=f0 + 120 * MS, name="forward", domain="train", tid=7100 + r)
        for j in range(4):
            k = f0 + 2 * MS + j * 29 * MS
            tr.add("kernel", t=k, end=k + 27 * MS, name="ampere_sgemm_128x64_tn", device=r, stream=7,
                   correlation=corr, grid=[64, 32, 1], block=[256, 1, 1])
            corr += 1
        b0 = f0 + 125 * MS
        tr.add("range", t=b0, end=b0 + 200 * MS, name="backward", domain="train", tid=7100 + r)
        for j in range(4):
            k = b0 + 2 * MS + j * 48 * MS
            tr.add("kernel", t=k, end=k + 45 * MS, name="ampere_sgemm_128x64_nt", device=r, stream=7,
                   correlation=corr, grid=[64, 32, 1], block=[256, 1, 1])
            corr += 1
        o0 = b0 + 205 * MS
        tr.add("range", t=o0, end=o0 + 40 * MS, name="optimizer", domain="train", tid=7100 + r)
        # Before the optimizer kernel the shim evicts activations and prefetches the spilled state.
        tr.add("decision", t=o0 + 100 * US, what="evict", ptr=addr(spill + 2 * 10**9), bytes=1 * 10**9, device=r,
               reason="least recently used, to make room")
        if step > 0:
            tr.add("budget", t=o0 + 120 * US, device=r, limit=8 * 10**9, used=used, resident=10**9)
        tr.add("decision", t=o0 + 150 * US, what="prefetch", ptr=addr(spill), bytes=2 * 10**9, device=r,
               reason="kernel argument fits the budget")
        tr.add("decision", t=o0 + 160 * US, what="left_remote", ptr=addr(spill + 3 * 10**9), bytes=1 * 10**9,
               device=r, reason="ping-ponged between host and device")
        migrate(tr, rng, o0 + 200 * US, o0 + 200 * US + int(1 * 10**9 / 44.0), spill + 2 * 10**9, 10**9 // 4 * 4,
                "dtoh", "eviction", device=r, chunk=250 * 10**6, faults_first=False)
        migrate(tr, rng, o0 + 200 * US, o0 + 200 * US + int(2 * 10**9 / 46.0), spill, 2 * 10**9, "htod",
                "user_prefetch", device=r, chunk=500 * 10**6, faults_first=False)
        tr.add("budget", t=o0 + 45 * MS, device=r, limit=8 * 10**9, used=used, resident=2 * 10**9)
        k = o0 + 46 * MS
        tr.add("kernel", t=k, end=k + 30 * MS, name="multi_tensor_apply_kernel<AdamFunctor>", device=r, stream=7,
               correlation=corr, grid=[320, 1, 1], block=[512, 1, 1])
        corr += 1
        # The part left remote is read over the link (remote maps); on rank 1 the CPU also writes it
        # between steps, and the pages ping-pong.
        tr.add("um", t=k + 1 * MS, end=k + 1 * MS, counter="remote_map", address=addr(spill + 3 * 10**9), bytes=0,
               value=0, device=r)
        if r == 1:
            for j in range(3):
                x = k + 5 * MS + j * 6 * MS
                tr.add("um", t=x, end=x + 2 * MS, counter="htod", address=addr(spill + 3 * 10**9), bytes=64 * MiB,
                       value=0, cause="coherence", device=r)
                tr.add("um", t=x + 2 * MS, end=x + 2 * MS, counter="gpu_fault", address=addr(spill + 3 * 10**9),
                       bytes=0, value=512, access="write", device=r)
                tr.add("um", t=x + 3 * MS, end=x + 5 * MS, counter="dtoh", address=addr(spill + 3 * 10**9),
                       bytes=64 * MiB, value=0, cause="coherence", device=r)
                tr.add("um", t=x + 3 * MS, end=x + 3 * MS, counter="cpu_fault", address=addr(spill + 3 * 10**9),
                       bytes=0, value=0x55D4C0004000, device=r)
                tr.add("um", t=x + 5 * MS, end=x + 5 * MS, counter="thrashing", address=addr(spill + 3 * 10**9),
                       bytes=0, value=0, device=r)
    if r == 1:
        tr.add("dropped", t=1200 * MS, records=12, source="cupti")
    tr.add("free", t=1300 * MS, ptr=addr(spill), bytes=4 * 10**9, api="cuMemFreeAsync")
    tr.end(dropped=12 if r == 1 else 0)
    tr.write("rank%d.jsonl" % r)


def truncated():
    """A managed run killed in the middle: no `end` line, and the last line cut off mid-object."""
    rng = random.Random(7)
    tr = Trace(header(pid=6100, argv=("./s4_managed", "--size", "2G"), t0=4_000_000_000_000,
                      wall="2026-11-21T23:00:00Z"))
    a = 0x7f3000000000
    tr.add("alloc", t=1 * MS, ptr=addr(a), bytes=2 * GiB, device=0, api="cuMemAllocManaged", kind="managed",
           placement="passthrough")
    k0 = 300 * MS
    tr.add("kernel", t=k0, end=k0 + 350 * MS, name="saxpy(float, float const*, float*)", device=0, stream=0,
           correlation=7, grid=[524288, 1, 1], block=[1024, 1, 1])
    migrate(tr, rng, k0 + 10 * US, k0 + 340 * MS, a, 2 * GiB, "htod", "coherence", chunk=256 * MiB)
    tr.add("um", t=k0 + 341 * MS, end=k0 + 342 * MS, counter="htod", address=addr(a), bytes=2 * MiB, value=0,
           cause="coherence", device=0)
    tr.write("truncated.jsonl", cut_last=60)


def training():
    """A training loop under swap at a budget below its peak, with the shim's `launch` lines: five
    steps of ten kernels (a forward pass making one activation per kernel, a backward pass using them
    in reverse and freeing them), weights used by every kernel; the shim's copies each way; the GPU
    idle between kernels while copies run."""
    budget = 1024 * MiB
    dev = dict(H100, budget_bytes=budget)
    tr = Trace(header(pid=7100, argv=("python3", "train.py"), t0=5_000_000_000_000, wall="2026-11-25T21:00:00Z",
                      policy="swap", devices=(dev,), faults=False))
    w = 0x7e0000000000
    tr.add("alloc", t=1 * MS, ptr=addr(w), bytes=512 * MiB, device=0, api="cuMemAlloc", kind="device",
           placement="swap")
    seq = 0
    t = 10 * MS
    fns = ["0x%x" % (0x5000 + k) for k in range(10)]
    names = ["forward_%d" % k for k in range(5)] + ["backward_%d" % k for k in range(5)]
    for step in range(5):
        acts = []
        for k in range(10):
            if k < 5:
                a = 0x7f0000000000 + (step * 5 + k) * 256 * MiB
                acts.append(a)
                tr.add("alloc", t=t, ptr=addr(a), bytes=256 * MiB, device=0, api="cuMemAllocAsync", kind="device",
                       placement="swap")
                regions = [addr(w), addr(a)]
            else:
                regions = [addr(w), addr(acts[9 - k])]
            tr.add("launch", t=t + 5 * US, seq=seq, stream="0x0", fn=fns[k], regions=regions)
            # Over the budget from the third activation on: three go out and come back, one copy of 256
            # MiB (4.9 ms at 54.6 GB/s) before each of six kernels, which waits for it.
            wait = 5 * MS if k in (2, 3, 4, 5, 6, 7) else 0
            if wait:
                kind = ("dtoh", "device", "pinned") if k < 5 else ("htod", "pinned", "device")
                tr.add("memcpy", t=t + 20 * US, end=t + 20 * US + 256 * MiB * 1000 // 54600, bytes=256 * MiB,
                       copy_kind=kind[0], src_kind=kind[1], dst_kind=kind[2], device=0, stream=158, correlation=0)
            start = t + 10 * US + wait
            tr.add("kernel", t=start, end=start + 2 * MS, name=names[k], device=0, stream=7, correlation=seq + 1,
                   grid=[1024, 1, 1], block=[256, 1, 1])
            seq += 1
            t = start + 2 * MS + 50 * US
            if k >= 5:
                tr.add("free", t=t, ptr=addr(acts[9 - k]), bytes=256 * MiB, api="cuMemFree")
    tr.add("free", t=t + MS, ptr=addr(w), bytes=512 * MiB, api="cuMemFree")
    tr.end()
    tr.write("training.jsonl")


def ping_pong(census_only=False):
    """S4's ping-pong (tests/gpu/placement/pingpong.cu, policy off): 256 MiB of managed memory, five
    rounds of a kernel over all of it and the CPU writing a float in every page. CUPTI keeps part of
    the fault-driven migrations to the device (45% on the H200) and none to the host, only CPU fault
    records; the shim's page census (`pages` lines) sees every page go and come back."""
    rng = random.Random(29)
    tr = Trace(header(argv=("./pingpong", "ping", "256", "5"), policy="off"))
    site(tr, 1, "main", module="/home/ana/s4/pingpong", offset="0x1e40", caller="__libc_start_main")
    a = 0x7f3c00000000
    tr.add("census", t=1 * MS - 10 * US, state="on", why=None)
    tr.add("alloc", t=1 * MS, ptr=addr(a), bytes=256 * MiB, device=0, api="cuMemAllocManaged", kind="managed",
           placement="passthrough", site=1)
    t = 300 * MS  # after the CPU wrote every value
    for r in range(5):
        if r > 0:  # the look before the launch: the pages the CPU wrote since the last synchronisation
            tr.add("pages", t=t, ptr=addr(a), to_gpu=0, to_cpu=256 * MiB, cpu=256 * MiB, at="launch")
        tr.add("launch", t=t + 5 * US, seq=r, stream="0x55d4c1a2b000", fn="0x55d4c19f0000", regions=[addr(a)])
        k0, k1 = t + 20 * US, t + 72 * MS
        tr.add("kernel", t=k0, end=k1, name="_Z7add_onePfm", device=0, stream=13, correlation=200 + r,
               grid=[264, 1, 1], block=[512, 1, 1])
        if not census_only:
            migrate(tr, rng, k0 + 10 * US, k1 - 10 * US, a, 112 * MiB, "htod", "coherence", chunk=16 * MiB,
                    faults_first=False)
        tr.add("pages", t=k1 + 30 * US, ptr=addr(a), to_gpu=256 * MiB, to_cpu=0, cpu=0, at="sync")
        for i in range(0 if census_only else 8):  # the CPU's writes: fault records, no migration record
            s = k1 + 100 * US + i * 2 * MS
            tr.add("um", t=s, end=s, counter="cpu_fault", address=addr(a + i * 32 * MiB), bytes=0,
                   value=0x55D4C0001F00 + 16 * (i % 2), device=0)
        t = k1 + 40 * MS
    tr.add("free", t=t + 60 * MS, ptr=addr(a), bytes=256 * MiB, api="cuMemFree")
    tr.end()
    # Census only: CUPTI's unified-memory counters off or unsupported (no `um` line at all).
    tr.write("ping_pong_census.jsonl" if census_only else "ping_pong.jsonl")


def malformed():
    good = json.dumps(header(pid=9000), separators=(", ", ": "))
    lines = [good,
             '{"type": "alloc", "t": 1000, "ptr": "0x7f0000000000", "bytes": 1048576, "device": 0, '
             '"api": "cuMemAllocManaged", "kind": "managed", "placement": "passthrough"}',
             '{"type": "kernel", "t": 5000, "end": 9000, "name": "k", "device": 0, "stream": 0, "correlation": 1}',
             '{"type": "um", "t": 5100, "end": 5200, "counter": "gpu_fault", "address": "0x7f0000000000", '
             '"bytes": 0, "value": 12, "access": "read", "device": 0}',
             '{"type": "um", "t": 5200, "end": 5900, "counter": "htod", "address": "0x7f0000000000", '
             '"bytes": 65536, "value": 0, "cause": "coherence", "device": 0}',
             '{"type": "um", "t": 6000, "end": 6700, "counter": "htod", "address": "0x7f0000010000", '
             '"bytes": 65536, "value": 0, "cause": "coherence", "device": 0}',
             # Line 7: a comma is missing (an editor's slip, or two writers interleaving).
             '{"type": "um", "t": 6800, "end": 7500, "counter": "htod" "address": "0x7f0000020000", '
             '"bytes": 65536, "value": 0, "cause": "coherence", "device": 0}',
             '{"type": "free", "t": 10000, "ptr": "0x7f0000000000", "bytes": 1048576, "api": "cuMemFree"}',
             '{"type": "end", "t": 10000, "events": 7, "dropped": 0}']
    with open(os.path.join(HERE, "bad_json_line7.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(HERE, "wrong_first_line.jsonl"), "w") as f:
        f.write("\n".join(lines[1:]) + "\n")
    v99 = json.loads(good)
    v99["version"] = 99
    with open(os.path.join(HERE, "version99.jsonl"), "w") as f:
        f.write("\n".join([json.dumps(v99, separators=(", ", ": "))] + lines[1:6] + lines[7:]) + "\n")


if __name__ == "__main__":
    um_faults()
    um_prefetched()
    copies()
    rank(0)
    rank(1)
    truncated()
    training()
    ping_pong()
    ping_pong(census_only=True)
    malformed()
