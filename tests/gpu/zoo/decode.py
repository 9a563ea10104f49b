"""Inference with weights bigger than the budget (issue: decode at the link's bound): a Llama-shaped
causal LM built from a config with random bf16 weights (no downloads), a prompt prefilled, then
greedy decoding one token at a time with the key/value cache, each token between two
synchronisations. Prints one JSON line: the median ms per token after the first quarter of the
tokens (the step learner's warm-up), the prefill time, the weights' bytes, the peak memory PyTorch
saw, and a digest of the generated tokens (equal digests: equal tokens); or the error it died of.

  decode.py SHAPE [--batch B] [--tokens N] [--prompt P] [--accelerate GPU_BYTES]

SHAPE: 3b (about 3.2 billion parameters: hidden 3072, 28 layers) or 8b (about 8 billion: hidden
4096, 32 layers), or tiny (for tests). --accelerate: Hugging Face accelerate's big-model dispatch
(infer_auto_device_map with max_memory GPU_BYTES on the GPU, the rest on the host, dispatch_model),
what people use today; the same weights (made on the GPU, then moved to the host).
"""
import argparse
import hashlib
import json
import statistics
import sys
import time

import torch

SHAPES = {
    # name: hidden, intermediate, layers, heads, key/value heads, vocabulary
    "tiny": (512, 1408, 4, 8, 4, 2048),
    "3b": (3072, 8192, 28, 24, 8, 128256),
    "8b": (4096, 14336, 32, 32, 8, 128256),
}


def build(shape):
    import transformers
    hidden, inter, layers, heads, kv, vocab = SHAPES[shape]
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                                   num_hidden_layers=layers, num_attention_heads=heads,
                                   num_key_value_heads=kv, max_position_embeddings=4096, tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    # Made on the GPU in bf16 directly: an 8B model made on the host in fp32 takes minutes.
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM._from_config(cfg, torch_dtype=torch.bfloat16)
    return model.eval(), cfg


def dispatch(model, gpu_bytes):
    import accelerate
    model = model.cpu()
    torch.cuda.empty_cache()
    device_map = accelerate.infer_auto_device_map(model, max_memory={0: gpu_bytes, "cpu": 512 * 2**30},
                                                  no_split_module_classes=["LlamaDecoderLayer"])
    return accelerate.dispatch_model(model, device_map=device_map)


@torch.no_grad()
def decode(model, ids, tokens):
    out = model(input_ids=ids, use_cache=True)
    cache = out.past_key_values
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    generated, times = [tok], []
    for _ in range(tokens - 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push("token")  # what a trace's token is (token_time.py)
        out = model(input_ids=tok, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        times.append(time.perf_counter() - t0)
        generated.append(tok)
    return torch.cat(generated, 1), times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--accelerate", type=int, default=0, metavar="GPU_BYTES")
    a = ap.parse_args()
    info = {"shape": a.shape, "batch": a.batch, "tokens": a.tokens}
    try:
        model, cfg = build(a.shape)
        info["weights_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
        if a.accelerate:
            model = dispatch(model, a.accelerate)
        torch.manual_seed(1)
        ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out, times = decode(model, ids, a.tokens)
        first = time.perf_counter() - t0 - sum(times)
    except torch.OutOfMemoryError as e:
        print(json.dumps({**info, "error": "OutOfMemoryError", "message": str(e).splitlines()[0][:160]}))
        return 3
    warm = max(1, len(times) // 4)
    print(json.dumps({**info, "token_ms": round(1000 * statistics.median(times[warm:]), 1),
                      "prefill_ms": round(1000 * first, 1),
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                      "digest": hashlib.sha1(out.cpu().numpy().tobytes()).hexdigest()[:12],
                      "first_tokens": out[0, :6].tolist()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
