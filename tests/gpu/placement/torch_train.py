"""A real training loop at a size that outgrows a device budget: torchvision's resnet50 from random
initialisation on random images. Prints one JSON line: median step time (after warm-up), peak
memory PyTorch saw, and the loss, or the error the program died of.

  torch_train.py [BATCH] [STEPS]
"""
import sys

import torch
import torchvision

import train_steps


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return train_steps.run(step, steps, {"batch": batch})


if __name__ == "__main__":
    sys.exit(main())
