// The allocation path's cost on the host, over the stand-in driver (whose calls cost next to
// nothing): a training step's pattern of stream-ordered allocations and frees, 300 a step of sizes
// from 64 KiB to 12 MiB, each used by one launch, nothing over the budget. Prints the time per
// allocation and free pair in nanoseconds, to compare policies side by side (tools/bench or by hand:
//   GPUMEMSHIM_POLICY=spill|swap|auto GPUMEMSHIM_DEVICE_LIMIT=4G LD_PRELOAD=... alloc_churn [STEPS]).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "swap_common.h"

using namespace swap_test;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  preload::use_device0();
  declare_kernels();
  CUstream st;
  CK(cuStreamCreate(&st, 0));
  constexpr int kPerStep = 300;
  std::vector<size_t> sizes(kPerStep);
  uint32_t x = 12345;
  for (auto& s : sizes) {
    x = x * 1103515245u + 12345u;
    s = (64u << 10) << ((x >> 16) % 8);  // 64 KiB to 8 MiB
    s += (x >> 8) % 4096 * 1024;
  }
  std::vector<CUdeviceptr> live;
  auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    // Forward: allocate and use; backward: free in reverse, a few kept to the end of the step.
    for (int i = 0; i < kPerStep; ++i) {
      CUdeviceptr p = 0;
      CK(cuMemAllocAsync(&p, sizes[i], st));
      size_t n = 16;
      void* params[] = {&p, &n};
      CK(cuLaunchKernel(preload::as_function(k_inc), 1, 1, 1, 1, 1, 1, 0, st, params, nullptr));
      live.push_back(p);
    }
    while (!live.empty()) {
      CK(cuMemFreeAsync(live.back(), st));
      live.pop_back();
    }
  }
  CK(cuStreamSynchronize(st));
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.0f ns per allocation, free and launch\n", ns / (steps * kPerStep));
  return 0;
}
