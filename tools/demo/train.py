"""The demo workload: a small GPT-style language model trained from random initialisation.

Batches are made on the CPU in ordinary (pageable) memory and moved to the GPU every step, as most
data loaders do, so the shim's statistics show the copies, allocations and launches of a real
training loop. Runs in about half a minute on one H100.
"""
import argparse
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, seq, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, : idx.shape[1]]
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(x)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=6)
    args = p.parse_args()

    torch.manual_seed(0)
    vocab = 4096
    model = TinyGPT(vocab, args.width, args.layers, 8, args.seq).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    # A fixed "corpus" with structure to learn: each token predicts the next one modulo vocab.
    corpus = torch.randint(0, vocab, (args.steps * args.batch, args.seq + 1))
    corpus[:, 1:] = (corpus[:, :-1] * 7 + 3) % vocab
    losses = []
    start = time.time()
    for step in range(args.steps):
        batch = corpus[step * args.batch:(step + 1) * args.batch].clone()  # pageable, new each step
        x = batch[:, :-1].to("cuda", non_blocking=True)
        y = batch[:, 1:].to("cuda", non_blocking=True)
        loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == args.steps - 1:
            losses.append(loss.item())
            print(f"step {step:4d}  loss {losses[-1]:.3f}", flush=True)
    torch.cuda.synchronize()
    elapsed = time.time() - start
    print(f"{args.steps} steps in {elapsed:.1f} s ({1000 * elapsed / args.steps:.0f} ms/step); "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; peak GPU memory "
          f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
