"""The training zoo: models people train, built from code with random weights (no downloads), each
with its usual optimizer and precision. One process trains one model for a few steps and prints one
JSON line (train_steps.run): the median step time after warm-up, the peak memory PyTorch saw, the
last loss; or the out-of-memory error it died of.

  zoo.py MODEL [--steps N] [--warmup N] [--save-on-cpu BUDGET_BYTES]

MODEL: resnet50 (torchvision, SGD with momentum, fp32, batch 128), llama (a Hugging Face transformers
causal LM built from a LlamaConfig, AdamW, bf16 autocast), vit (torchvision vit_b_16, AdamW, bf16
autocast), gpt (tests/gpu/placement/torch_gpt.py's model: bf16 weights, SGD with momentum); and for
the class check (bench.sh with MODELS="convnext bert t5 effnet"): convnext (torchvision
convnext_tiny, channels last, AdamW, bf16), bert (a transformers BertForMaskedLM, fused AdamW, fp16
with a gradient scaler), t5 (a transformers T5ForConditionalGeneration, Adafactor, bf16), effnet
(torchvision efficientnet_b0, RMSprop, fp32).
--save-on-cpu: PyTorch's own answer to a step that does not fit, activations offloaded with
torch.autograd.graph.save_on_cpu(pin_memory=True), under torch.cuda.set_per_process_memory_fraction
set to the budget.
"""
import argparse
import contextlib
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "placement"))
import train_steps  # noqa: E402


def resnet50():
    import torchvision
    model = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(128, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (128,), device="cuda")
    return model, opt, lambda: F.cross_entropy(model(x), y), contextlib.nullcontext, {"batch": 128}


def llama():
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=1536, intermediate_size=4096, num_hidden_layers=8,
                                   num_attention_heads=12, num_key_value_heads=12, max_position_embeddings=1024)
    cfg._attn_implementation = "sdpa"
    model = transformers.LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch, seq = 8, 1024
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    return model, opt, lambda: model(input_ids=ids, labels=ids).loss, autocast, {"batch": batch, "seq": seq}


def vit():
    import torchvision
    model = torchvision.models.vit_b_16().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(96, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (96,), device="cuda")
    autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    return model, opt, lambda: F.cross_entropy(model(x), y), autocast, {"batch": 96}


def gpt():
    import torch_gpt
    vocab, width, layers, seq, batch = 8192, 4096, 2, 1024, 32
    model = torch_gpt.GPT(vocab, width, layers, width // 128, seq).cuda().to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randint(0, vocab, (batch, seq), device="cuda")
    y = torch.randint(0, vocab, (batch, seq), device="cuda")
    loss = lambda: F.cross_entropy(model(x).view(-1, vocab).float(), y.view(-1))  # noqa: E731
    return model, opt, loss, contextlib.nullcontext, {"batch": batch, "width": width}


# The class check: models the table does not name, each with another optimizer or precision,
# run as a new user would: bench.sh with MODELS="convnext bert t5 effnet".
def convnext():
    import torchvision
    model = torchvision.models.convnext_tiny().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(128, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (128,), device="cuda")
    autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    return model, opt, lambda: F.cross_entropy(model(x), y), autocast, {"batch": 128}


def bert():
    # fp16 with a gradient scaler (its unscale reads the gradients through PyTorch's multi-tensor
    # kernels, and its step waits for the check of infinities), fused AdamW.
    import transformers
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                  intermediate_size=3072, max_position_embeddings=512)
    cfg._attn_implementation = "sdpa"
    model = transformers.BertForMaskedLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    batch, seq = 32, 512
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    autocast = lambda: torch.autocast("cuda", dtype=torch.float16)  # noqa: E731
    scaler = torch.amp.GradScaler("cuda")
    return (model, opt, lambda: model(input_ids=ids, labels=ids).loss, autocast, {"batch": batch, "seq": seq},
            scaler)


def t5():
    # An encoder-decoder with Adafactor (factored second moments: many small state tensors).
    import transformers
    cfg = transformers.T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=8,
                                num_decoder_layers=8, num_heads=12, decoder_start_token_id=0, pad_token_id=0)
    model = transformers.T5ForConditionalGeneration(cfg).cuda()
    opt = transformers.optimization.Adafactor(model.parameters(), lr=1e-3, relative_step=False, scale_parameter=False)
    batch, src, tgt = 24, 512, 128
    ids = torch.randint(0, cfg.vocab_size, (batch, src), device="cuda")
    labels = torch.randint(0, cfg.vocab_size, (batch, tgt), device="cuda")
    autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    return model, opt, lambda: model(input_ids=ids, labels=labels).loss, autocast, {"batch": batch, "seq": src}


def effnet():
    # Depthwise convolutions, many small tensors, RMSprop, fp32. Deterministic convolutions and a
    # small rate, so that a loss compares runs (docs/benchmarks.md, "The class check").
    import torchvision
    torch.backends.cudnn.deterministic = True
    model = torchvision.models.efficientnet_b0().cuda()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-4, momentum=0.9)
    x = torch.randn(192, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (192,), device="cuda")
    return model, opt, lambda: F.cross_entropy(model(x), y), contextlib.nullcontext, {"batch": 192}


MODELS = {"resnet50": resnet50, "llama": llama, "vit": vit, "gpt": gpt,
          "convnext": convnext, "bert": bert, "t5": t5, "effnet": effnet}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the median")
    ap.add_argument("--save-on-cpu", type=int, default=0, metavar="BUDGET_BYTES")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    if a.save_on_cpu:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.save_on_cpu / total))
    model, opt, forward, autocast, info, *scaler = MODELS[a.model]()
    scaler = scaler[0] if scaler else None
    offload = (lambda: torch.autograd.graph.save_on_cpu(pin_memory=True)) if a.save_on_cpu else contextlib.nullcontext

    def step():
        with offload(), autocast():
            loss = forward()
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss

    return train_steps.run(step, a.steps, {"model": a.model, **info}, a.warmup)


if __name__ == "__main__":
    sys.exit(main())
