// Movable memory that a loop frees after leaving it idle (GPUMEMSHIM_SWAP_FORECAST), over the
// stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=12M and GPUMEMSHIM_SWAP_CHUNK=4M: three chunks.
// Each iteration, like a training step with zero_grad after the forward pass:
//   a (8M) is made and used by 20 launches (the forward pass), while g, the previous iteration's
//   4M "gradient", sits idle beside w (4M, the weights);
//   the previous g is freed (zero_grad), a new g is made and used with w (backward, optimizer);
//   a is freed.
// Making a needs a chunk: least recently used, that is the previous g, copied out only to be freed
// on the host. Once the shim has seen two gs freed idle it keeps them and evicts w instead, and the
// room the freed g leaves takes the new g with no eviction. Every byte is checked each iteration;
// the runner compares the bytes evicted with the forecast on and off.
#include "swap_common.h"

using namespace swap_test;

int main() {
  preload::use_device0();
  declare_kernels();
  CUdeviceptr w = 0, g = 0;
  CK(cuMemAlloc(&w, 4 * MiB));
  put(w, 7);
  uint32_t w_plus = 0;
  for (uint32_t it = 0; it < 10; ++it) {
    CUdeviceptr a = 0;
    CK(cuMemAlloc(&a, 8 * MiB));
    put(a, 100 + it);
    for (int k = 0; k < 20; ++k) CK(inc(a, nullptr));
    if (g) {
      CHECK(holds(g, 200 + it - 1, 1));
      CK(cuMemFree(g));
    }
    CK(cuMemAlloc(&g, 4 * MiB));
    put(g, 200 + it);
    CK(inc(g, nullptr));
    CK(inc(w, nullptr));
    ++w_plus;
    CHECK(holds(a, 100 + it, 20));
    CK(cuMemFree(a));
  }
  CK(cuCtxSynchronize());
  CHECK(holds(w, 7, w_plus));
  CHECK(holds(g, 209, 1));
  CK(cuMemFree(g));
  CK(cuMemFree(w));
  std::printf("swap forecast ok\n");
  return 0;
}
