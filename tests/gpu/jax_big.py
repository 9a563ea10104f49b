"""JAX with its defaults making three arrays of 512 MiB, past a 1 GiB budget: XLA's default
allocator sizes one pool from what cuMemGetInfo reports (the budget) and fails past it; under the
shim JAX asks the driver for each buffer (the shim sets XLA_PYTHON_CLIENT_ALLOCATOR) and the shim
places them. Prints what it computed: the same with and without the shim.
"""
import sys


def main():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(f"no jax: {e}")
        return 0
    n = (512 << 20) // 4
    a = jnp.arange(n, dtype=jnp.float32) % 7
    b = jnp.ones(n, dtype=jnp.float32) * 2
    c = a * b + 1
    print(f"sum of every millionth {float(jnp.sum(c[:: 1 << 20]))}, last {float(c[-1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
