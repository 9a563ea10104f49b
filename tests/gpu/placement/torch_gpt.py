"""A GPT-style transformer trained from random initialisation on random tokens, at a size that
outgrows a device budget: pre-norm blocks (causal attention through scaled_dot_product_attention,
a 4x MLP), bfloat16 weights and activations, SGD with momentum. Prints one JSON line: median step
time (after warm-up), peak memory PyTorch saw, and the loss, or the error the program died of.

  torch_gpt.py [BATCH] [STEPS] [WIDTH] [LAYERS] [SEQ]

Why this shape beside resnet50 (torch_train.py): a step under a budget moves at least the bytes
over the budget out during the forward pass and back during the backward pass, over one link
direction each, so the step takes at least max(forward, over/link) + max(backward, over/link).
resnet50 makes 10.6 GiB of activations in a 71 ms step (1.6x a 7 GB budget needs 3.6 GiB each way,
72 ms at 54 GB/s: at least 2.0x); a wide transformer does more arithmetic per byte it keeps.
"""
import sys

import torch
import torch.nn.functional as F

import train_steps


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, 4 * width)
        self.out = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, vocab, width, layers, heads, seq):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Embedding(seq, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    width = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    layers = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    seq = int(sys.argv[5]) if len(sys.argv) > 5 else 1024
    vocab = 8192
    torch.manual_seed(0)
    model = GPT(vocab, width, layers, max(1, width // 128), seq).cuda().to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randint(0, vocab, (batch, seq), device="cuda")
    y = torch.randint(0, vocab, (batch, seq), device="cuda")

    def step():
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab).float(), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return train_steps.run(step, steps, {"batch": batch, "width": width, "layers": layers, "seq": seq})


if __name__ == "__main__":
    sys.exit(main())
