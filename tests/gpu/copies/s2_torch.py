"""Scenario S2 as its users run it: a 10,000,000-element float32 tensor (40 MB) moved to the GPU
with .to('cuda', non_blocking=True) 100 times, and a 40 MB GPU tensor brought back with .cpu() 100
times. Modes: plain (pageable), pinned (tensor.pin_memory(); for .cpu(), copy_ into a pinned tensor
made once). Prints one JSON line per measurement: GB/s, and a checksum."""
import json
import sys
import time

import torch


def bench(fn, reps=100):
    fn()
    torch.cuda.synchronize()
    t0 = time.time()
    for _ in range(reps):
        out = fn()
    torch.cuda.synchronize()
    return reps * 40e6 / (time.time() - t0) / 1e9, out


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
    x = torch.arange(10_000_000, dtype=torch.float32)
    if mode == "pinned":
        x = x.pin_memory()
    gbps, y = bench(lambda: x.to("cuda", non_blocking=True))
    print(json.dumps({"mode": mode, "what": ".to('cuda', non_blocking=True)", "gbps": round(gbps, 2),
                      "checksum": float(y[::1000].sum())}))
    g = torch.arange(10_000_000, dtype=torch.float32, device="cuda")
    if mode == "pinned":
        dst = torch.empty(10_000_000, dtype=torch.float32).pin_memory()
        gbps, z = bench(lambda: dst.copy_(g))
    else:
        gbps, z = bench(lambda: g.cpu())
    print(json.dumps({"mode": mode, "what": ".cpu()", "gbps": round(gbps, 2), "checksum": float(z[::1000].sum())}))


if __name__ == "__main__":
    main()
