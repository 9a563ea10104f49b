"""The zoo's resnet50 under DistributedDataParallel, one process a GPU (torchrun --nproc_per_node N):
SGD with momentum, fp32, batch 64 a rank, each rank its own random batch (seeded by rank). Rank 0
prints one JSON line: the median step time after warm-up, the last loss, and a digest of the
parameters after the last step (every rank holds the same: DDP averages the gradients), so that a
run under the shim can be checked against one without it.

  torchrun --nproc_per_node 2 tests/gpu/zoo/ddp.py [--steps N]
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    import torchvision
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    model = torch.nn.parallel.DistributedDataParallel(torchvision.models.resnet50().cuda(), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator(device="cuda").manual_seed(1 + rank)
    x = torch.randn(64, 3, 224, 224, device="cuda", generator=g)
    y = torch.randint(0, 1000, (64,), device="cuda", generator=g)
    times = []
    for _ in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.time()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.time() - t0)
    digest = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
    peak = torch.cuda.max_memory_allocated() / 2**30
    ms = torch.tensor([1000 * statistics.median(times[3:])], device="cuda")
    dist.all_reduce(ms, op=dist.ReduceOp.MAX)  # the step is as slow as its slowest rank
    if rank == 0:
        print(json.dumps({"model": "resnet50-ddp", "ranks": dist.get_world_size(), "batch_per_rank": 64,
                          "step_ms": round(ms.item(), 1), "peak_gib": round(peak, 2), "loss": round(loss.item(), 4),
                          "params": digest}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
