"""CuPy on its stream-ordered pool (cupy.cuda.MemoryAsyncPool, cudaMallocAsync on the device's
default pool), three times a 512 MiB budget in arrays: the arrays past the budget are placed by the
shim like any allocation (host memory under spill and auto), and every result is as without the
shim. Prints what it computed: the same with and without the shim.
"""
import sys


def main():
    try:
        import cupy as cp
    except ImportError as e:
        print(f"no cupy: {e}")
        return 0
    cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
    n = (128 << 20) // 4
    arrays = []
    for i in range(12):  # 1.5 GiB in all, each array written by a kernel and kept alive
        a = cp.arange(n, dtype=cp.float32) % (i + 3)
        a *= i + 1
        arrays.append(a)
    total = cp.zeros(n, dtype=cp.float32)
    for a in arrays:
        total += a
    cp.cuda.Stream.null.synchronize()
    print("sums", " ".join(f"{float(a[:: 1 << 16].sum()):.1f}" for a in arrays))
    print(f"total {float(total[:: 1 << 12].sum()):.1f}")
    del arrays, total
    cp.cuda.Stream.null.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
