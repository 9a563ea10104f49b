"""The demo's training loop: a GPT-style language model (pre-norm blocks, causal attention, a 4x
MLP) trained from random initialisation, in bfloat16, with SGD and momentum. Each batch is made on
the CPU in ordinary (pageable) memory and copied to the GPU every step, as most data loaders do;
the loop, its forward passes, backward passes and optimizer steps are NVTX ranges, so a trace's report
splits its time and traffic by phase.

Prints one line per step, then one JSON line (also written to --json FILE): the median step time
after the warm-up steps, the peak memory PyTorch allocated, the first and last loss. A run that
dies of out-of-memory prints the error in the same JSON line instead and exits with status 3.

Bounded: at most --steps steps, and no new step once --max-seconds have passed since the first
one began (after at least one step past the warm-up).
"""
import argparse
import contextlib
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2.0 and later
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    hidden = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return scores.masked_fill(hidden, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm_attn = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.attn_out = nn.Linear(width, width)
        self.norm_mlp = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        # (b, t, 3c) -> three (b, heads, t, c / heads)
        q, k, v = self.qkv(self.norm_attn(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.attn_out(causal_attention(q, k, v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm_mlp(x))


class LanguageModel(nn.Module):
    def __init__(self, vocab, width, layers, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(1, seq, width))
        self.blocks = nn.Sequential(*(Block(width, max(1, width // 128)) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.unembed = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        return self.unembed(self.norm(self.blocks(self.embed(tokens) + self.position[:, : tokens.shape[1]])))


def nvtx_ranges(device):
    """Opens the NVTX range "train" around the loop; returns a context manager factory that names a
    phase inside it, and the function that closes "train". No-ops without NVTX."""
    if device == "cuda":
        try:
            torch.cuda.nvtx.range_push("train")
            return torch.cuda.nvtx.range, torch.cuda.nvtx.range_pop
        except (RuntimeError, AttributeError):  # a PyTorch built without NVTX
            pass
    return (lambda name: contextlib.nullcontext()), (lambda: None)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12, help="at most this many steps (default 12)")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the median (default 3)")
    p.add_argument("--max-seconds", type=float, default=30.0,
                   help="no new step after this long, once a step past the warm-up is done (default 30)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    p.add_argument("--device", default="cuda", help="cuda (default); cpu checks the script without a GPU")
    p.add_argument("--json", metavar="FILE", help="also write the result line to FILE")
    args = p.parse_args()
    if args.steps <= args.warmup:
        p.error("--steps must be larger than --warmup")
    return args


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def train(args, result):
    """Runs the loop; fills `result` as it goes, so that an out-of-memory error keeps what was done."""
    device = args.device
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    model = LanguageModel(args.vocab, args.width, args.layers, args.seq).to(device=device, dtype=dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    phase, end_train = nvtx_ranges(device)
    times, losses = [], []
    start = time.time()
    for step in range(args.steps):
        # A new batch in pageable memory every step: tokens, and a next token to learn from them.
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq))
        targets = (tokens * 7 + 3) % args.vocab
        synchronize(device)
        t0 = time.time()
        x = tokens.to(device, non_blocking=True)
        y = targets.to(device, non_blocking=True)
        with phase("forward"):
            loss = F.cross_entropy(model(x).reshape(-1, args.vocab).float(), y.reshape(-1))
        with phase("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with phase("optimizer"):
            opt.step()
        losses.append(loss.item())
        synchronize(device)
        times.append(time.time() - t0)
        result["steps_run"] = step + 1
        print(f"step {step:3d}  {1000 * times[-1]:8.1f} ms  loss {losses[-1]:.4f}"
              f"{'  (warm-up)' if step < args.warmup else ''}", flush=True)
        if len(times) > args.warmup and time.time() - start >= args.max_seconds:
            result["stopped"] = f"after {args.max_seconds:g} s"
            break
    end_train()
    measured = times[args.warmup:]
    result.update(median_ms=round(1000 * statistics.median(measured), 1), measured_steps=len(measured),
                  step_ms=[round(1000 * t, 1) for t in times], loss_first=round(losses[0], 4),
                  loss_last=round(losses[-1], 4))
    if not all(math.isfinite(v) for v in losses):
        result["error"] = "the loss is not finite"


def main():
    args = parse_args()
    result = {"width": args.width, "layers": args.layers, "batch": args.batch, "seq": args.seq,
              "dtype": args.dtype, "steps_run": 0}
    if args.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        result.update(device=props.name, device_gib=round(props.total_memory / 2**30, 1))
    status = 0
    try:
        train(args, result)
        status = 4 if "error" in result else 0
    except OUT_OF_MEMORY as e:
        result.update(error="out of memory", message=str(e).splitlines()[0][:200])
        status = 3
    except RuntimeError as e:  # out-of-memory met in a library (cuBLAS, cuDNN) comes as a RuntimeError
        if "out of memory" not in str(e).lower() and "alloc_failed" not in str(e).lower():
            raise
        result.update(error="out of memory", message=str(e).splitlines()[0][:200])
        status = 3
    if args.device == "cuda":
        result["peak_bytes"] = torch.cuda.max_memory_allocated()
        result["peak_gib"] = round(result["peak_bytes"] / 2**30, 2)
    line = json.dumps(result)
    print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
