"""A real training loop at a size that outgrows a device budget: torchvision's resnet50 from random
initialisation on random images. Prints one JSON line: median step time (after warm-up), peak
memory PyTorch saw, and the loss, or the error the program died of.

  torch_train.py [BATCH] [STEPS]
"""
import json
import statistics
import sys
import time

import torch
import torchvision


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    times = []
    try:
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.time()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            times.append(time.time() - t0)
    except torch.OutOfMemoryError as e:
        print(json.dumps({"batch": batch, "error": "OutOfMemoryError", "message": str(e).splitlines()[0][:160]}))
        return 3
    print(json.dumps({"batch": batch, "step_ms": round(1000 * statistics.median(times[3:]), 1),
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "loss": round(loss.item(), 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
