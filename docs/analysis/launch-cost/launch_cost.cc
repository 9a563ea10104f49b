// Offline: the shim's cost per launch and the driver calls it adds, over the stand-in driver
// (tests/preload/fake), for a step shaped like the zoo's Llama-style one under `auto` with no
// limit: 1,356 launches of three pointers and 640 stream-ordered allocations of 1 to 48 MiB a step.
// The stand-in prices none of the driver's calls; FAKE_CUDA_COUNTS=FILE writes how many of each
// the process made. Results: docs/benchmarks.md, "What `auto` costs a step that fits".
//   g++ -O2 -std=c++20 -I tests/preload/progs -I tests/preload/fake -I /usr/local/cuda/include \
//     docs/analysis/launch-cost/launch_cost.cc -L build/tests/preload/fakecuda -lcuda -ldl -lpthread -o launch_cost
//   export LD_LIBRARY_PATH=build/tests/preload/fakecuda
//   ./launch_cost 12                                    # the stand-in alone
//   GPUMEMSHIM_POLICY=auto GPUMEMSHIM_HOST_POOL=off LD_PRELOAD=build/shim/libgpumemshim.so \
//     FAKE_CUDA_COUNTS=/tmp/counts ./launch_cost 12
#include <chrono>
#include <cstdio>
#include <vector>
#include "swap_common.h"
using namespace swap_test;
static void k_nop(void**) {}
int main(int argc, char** argv) {
  preload::use_device0();
  size_t sizes[] = {sizeof(CUdeviceptr), sizeof(CUdeviceptr), sizeof(CUdeviceptr)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_nop), sizes, 3) == 0);
  CHECK(fake_cuda_set_kernel_name(preload::as_function(k_nop), "nop") == 0);
  std::vector<CUdeviceptr> w(64);
  for (size_t i = 0; i < w.size(); ++i) CK(cuMemAlloc(&w[i], (1 + i % 12) * MiB));
  const int steps = argc > 1 ? atoi(argv[1]) : 12;
  long launches = 0;
  uint32_t rng = 1;
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    rng = 12345;
    std::vector<CUdeviceptr> live;
    int made = 0;
    for (int k = 0; k < 1356; ++k) {
      rng = rng * 1103515245u + 12345u;
      if (made < 640 && (k % 2 == 0)) {
        CUdeviceptr p;
        CK(cuMemAllocAsync(&p, (1 + (rng >> 8) % 48) * MiB, nullptr));
        live.push_back(p);
        ++made;
      }
      CUdeviceptr a = w[(rng >> 4) % w.size()], b = live[(rng >> 12) % live.size()], c = live.back();
      void* params[] = {&a, &b, &c};
      CK(cuLaunchKernel(preload::as_function(k_nop), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
      ++launches;
      if (k % 4 == 3 && live.size() > 8) {
        CK(cuMemFreeAsync(live[live.size() - 2], nullptr));
        live.erase(live.end() - 2);
      }
    }
    for (auto p : live) CK(cuMemFreeAsync(p, nullptr));
  }
  CK(cuCtxSynchronize());
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%ld launches, %.2f us a launch (allocs included)\n", launches, ns / launches / 1000);
}
