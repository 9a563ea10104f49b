"""A JAX training step, timed, for runs past the budget (tests/gpu/zoo/ab.sh, kind jax): an MLP of
`--layers` float32 layers `--width` wide, SGD with momentum from optax, jitted with the parameters
and the optimizer's state donated, on fixed random data (batch `--batch`), with JAX's defaults. At
the defaults (width 8192, 8 layers, batch 4096): 2 GiB of parameters, as much of momentum and of
gradients, 1 GiB of activations. Prints one JSON line: the median step after two warm-up steps
(ms), the last loss, and XLA's peak of memory in use where it reports one ("error" and exit 0 where
JAX or optax is missing).
"""
import argparse
import json
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4096)
    a = ap.parse_args()
    try:
        import jax
        import jax.numpy as jnp
        import optax
    except ImportError as e:
        print(json.dumps({"model": "jax_mlp", "error": f"no jax or optax: {e}"}))
        return 0
    keys = jax.random.split(jax.random.PRNGKey(0), a.layers + 2)
    params = [jax.random.normal(keys[i], (a.width, a.width), jnp.float32) / a.width**0.5 for i in range(a.layers)]
    x = jax.random.normal(keys[-2], (a.batch, a.width), jnp.float32)
    y = jax.random.normal(keys[-1], (a.batch, a.width), jnp.float32)
    opt = optax.sgd(1e-2, momentum=0.9)
    state = opt.init(params)

    def loss_fn(ps, x, y):
        h = x
        for w in ps:
            h = jnp.tanh(h @ w)
        return jnp.mean((h - y) ** 2)

    def step(ps, st, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        updates, st = opt.update(grads, st, ps)
        return optax.apply_updates(ps, updates), st, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    times, loss = [], None
    for _ in range(max(a.steps, 3)):
        t0 = time.perf_counter()
        params, state, loss = step(params, state, x, y)
        loss.block_until_ready()
        times.append((time.perf_counter() - t0) * 1e3)
    peak = None
    try:
        peak = (jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use")
    except Exception:  # noqa: BLE001 (not every backend reports memory)
        pass
    print(json.dumps({"model": "jax_mlp", "width": a.width, "layers": a.layers, "batch": a.batch,
                      "step_ms": round(statistics.median(times[2:]), 1), "loss": round(float(loss), 6),
                      "peak_gib": None if peak is None else round(peak / 2**30, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
