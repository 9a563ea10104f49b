// Movable memory whose uses are over long before room is needed (GPUMEMSHIM_SWAP_EARLY), over the
// stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=12M, GPUMEMSHIM_SWAP_CHUNK=4M (three chunks)
// and GPUMEMSHIM_SWAP_ORDER=scan. Each iteration, like a training step:
//   the forward pass makes a1 and uses it with w (4M, the weights), then makes a2, which needs
//   room: the least recently used chunk, m (4M, the optimizer's momentum), goes; 30 launches use
//   a2 and w;
//   the backward pass uses a1, then a1 and a2 are freed;
//   the optimizer step uses m (it comes back, about 38 launches after its last use: 32 or more
//   make a long absence) and then w.
// Once m has been evicted for room after one use twice in a row, the shim evicts it as soon as its
// use is over on the GPU, before a1 is filled. The first argument changes that:
//   busy       the stand-in driver's events never complete: no early eviction can go without
//              waiting, so none does;
//   unscanned  before each use of the forward pass until room takes m, a kernel with no parameter
//              layout (work no scan sees: it may use m), so none does either.
// Every byte is checked each iteration; the runner compares the shim's counts.
#include "swap_common.h"

using namespace swap_test;

// Reads its pointer's first word: a kernel whose parameters the shim cannot scan.
static volatile uint32_t g_seen;
static void k_unseen(void** p) { g_seen = *preload::dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0])); }

int main(int argc, char** argv) {
  preload::use_device0();
  declare_kernels();
  if (preload::has_arg(argc, argv, "busy")) fake_cuda_set_events_busy(1);
  const bool unscanned = preload::has_arg(argc, argv, "unscanned");
  // Takes m's address, but the shim cannot know: no layout was declared for it.
  auto unseen = [&](CUdeviceptr x) {
    if (!unscanned) return;
    void* params[] = {&x};
    CK(cuLaunchKernel(preload::as_function(k_unseen), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  };
  CUdeviceptr w = 0, m = 0;
  CK(cuMemAlloc(&m, 4 * MiB));
  put(m, 5);
  CK(cuMemAlloc(&w, 4 * MiB));
  put(w, 7);
  uint32_t w_plus = 0, m_plus = 0;
  for (uint32_t it = 0; it < 10; ++it) {
    CUdeviceptr a1 = 0, a2 = 0;
    CK(cuMemAlloc(&a1, 4 * MiB));
    unseen(m);
    put(a1, 100 + it);
    unseen(m);
    CK(inc(a1, nullptr));
    unseen(m);
    CK(inc(w, nullptr));
    CK(cuMemAlloc(&a2, 4 * MiB));
    put(a2, 200 + it);
    for (int k = 0; k < 15; ++k) {
      CK(inc(a2, nullptr));
      CK(inc(w, nullptr));
    }
    w_plus += 16;
    CK(inc(a1, nullptr));
    CHECK(holds(a1, 100 + it, 2));
    CHECK(holds(a2, 200 + it, 15));
    CK(cuMemFree(a1));
    CK(cuMemFree(a2));
    CK(inc(m, nullptr));
    ++m_plus;
    CK(inc(w, nullptr));
    ++w_plus;
  }
  CK(cuCtxSynchronize());
  fake_cuda_set_events_busy(0);
  CHECK(holds(m, 5, m_plus));
  CHECK(holds(w, 7, w_plus));
  CK(cuMemFree(m));
  CK(cuMemFree(w));
  std::printf("swap early ok\n");
  return 0;
}
