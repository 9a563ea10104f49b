"""JAX under the shim: a jitted training-like loop (a two-layer MLP, its gradient, SGD updates) on
fixed random inputs, with JAX's defaults (XLA preallocates three quarters of the memory the driver
reports, which under the shim is the budget). Prints a digest of the parameters after each step;
the digest is deterministic run to run on one machine, so the run under the shim must print the
same lines as the run without it.
"""
import hashlib
import os
import sys

import numpy as np

# XLA picks its GEMM algorithms by timing them, and by the memory left for their workspaces: either
# may change the last bits of the results from run to run. One fixed choice makes the digest a
# check of the data alone.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_autotune_level=0").strip()


def main():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(f"no jax: {e}")
        return 0
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("no jax GPU device")
        return 0
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((4096, 1024), dtype=np.float32))
    y = jnp.asarray(rng.standard_normal((4096, 256), dtype=np.float32))
    params = [jnp.asarray(rng.standard_normal((1024, 2048), dtype=np.float32) * 0.02),
              jnp.asarray(rng.standard_normal((2048, 256), dtype=np.float32) * 0.02)]

    def loss(p):
        h = jnp.tanh(x @ p[0])
        return jnp.mean((h @ p[1] - y) ** 2)

    @jax.jit
    def step(p):
        g = jax.grad(loss)(p)
        return [w - 0.1 * gw for w, gw in zip(p, g)]

    for i in range(8):
        params = step(params)
        digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in params)).hexdigest()[:16]
        print(f"step {i} loss {float(loss(params)):.6f} params {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
