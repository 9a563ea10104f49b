"""A JAX training loop with optax, past the budget: a 6-layer MLP of 4096-wide float32 layers
(384 MiB of parameters, as much of momentum, the gradients and the activations: about 1.6 GiB a
step), SGD with momentum, jitted, five steps on fixed random data, with JAX's defaults. Prints
every step's loss and a checksum of the parameters: the same with and without the shim, to the
rounding of sums XLA orders differently when told of less memory. (Adam was tried first: its
normalised updates turn a difference in the seventh digit of a tiny gradient into one of the
learning rate, and the checksums of two correct runs differed by 1e-3.) Prints "no jax" or
"no optax" (and exits 0) where they are missing.
"""
import sys


def main():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(f"no jax: {e}")
        return 0
    try:
        import optax
    except ImportError as e:
        print(f"no optax: {e}")
        return 0
    width, layers, batch = 4096, 6, 2048
    keys = jax.random.split(jax.random.PRNGKey(0), layers + 2)
    params = [jax.random.normal(keys[i], (width, width), jnp.float32) / width**0.5 for i in range(layers)]
    x = jax.random.normal(keys[-2], (batch, width), jnp.float32)
    y = jax.random.normal(keys[-1], (batch, width), jnp.float32)
    opt = optax.sgd(1e-2, momentum=0.9)
    state = opt.init(params)

    def loss_fn(ps):
        h = x
        for w in ps:
            h = jnp.tanh(h @ w)
        return jnp.mean((h - y) ** 2)

    @jax.jit
    def step(ps, st):
        loss, grads = jax.value_and_grad(loss_fn)(ps)
        updates, st = opt.update(grads, st, ps)
        return optax.apply_updates(ps, updates), st, loss

    for i in range(5):
        params, state, loss = step(params, state)
        print(f"step {i} loss {float(loss)!r}")
    print(f"params checksum {float(sum(jnp.sum(w[::64, ::64]) for w in params))!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
