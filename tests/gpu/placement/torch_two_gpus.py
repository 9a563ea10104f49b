"""PyTorch on two GPUs under GPUMEMSHIM_POLICY=spill with a budget per device
(GPUMEMSHIM_DEVICE_LIMIT=0:256M,1:128M): each device reports its own budget as its total memory;
tensors worth twice a device's budget live on each device and compute exactly what the CPU does;
tensors move from one device to the other intact. Prints "ok", or "skip: ..." with one GPU."""
import sys

import torch

MiB = 1 << 20
BUDGETS = {0: 256 * MiB, 1: 128 * MiB}


def main():
    if torch.cuda.device_count() < 2:
        print(f"skip: {torch.cuda.device_count()} GPU(s)")
        return
    for d, budget in BUDGETS.items():
        free, total = torch.cuda.mem_get_info(d)
        assert total == budget, f"device {d} reports {total} bytes, its budget is {budget}"
    g = torch.Generator().manual_seed(0)
    on = {}
    for d, budget in BUDGETS.items():
        n = budget // 4 // 4  # a quarter of the budget per tensor, 8 tensors: twice the budget
        cpu = [torch.rand(n, generator=g) for _ in range(8)]
        gpu = [t.to(f"cuda:{d}") for t in cpu]
        for i in range(7):  # one multiply and one add per element: the same on the CPU and the GPU
            got = (gpu[i] * 2 + gpu[i + 1]).cpu()
            assert torch.equal(got, cpu[i] * 2 + cpu[i + 1]), f"device {d}, tensor {i}: wrong values"
        on[d] = (cpu, gpu)
    # Across devices, both ways, spilled or not.
    for src, dst in ((0, 1), (1, 0)):
        cpu, gpu = on[src]
        for i in (0, 7):
            moved = gpu[i].to(f"cuda:{dst}")
            assert moved.device.index == dst
            assert torch.equal(moved.cpu(), cpu[i]), f"cuda:{src} -> cuda:{dst}, tensor {i}: wrong values"
            del moved
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    print("ok")


if __name__ == "__main__":
    sys.exit(main())
