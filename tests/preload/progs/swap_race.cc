// A move of movable memory while another thread queues work that uses it, in either
// GPUMEMSHIM_SWAP_ORDER, over the stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=8M and
// GPUMEMSHIM_SWAP_CHUNK=4M (two chunks).
//
// A second thread launches a kernel that adds one to every word of m the way a GPU runs it: into
// the memory that backs m when it starts, for as long as it runs (here until the main thread has
// made y, or 300 ms). Meanwhile the main thread makes y, which needs room: m goes, the least
// recently used chunk. A round of moves that started while the kernel was being queued would copy m
// out before the kernel's writes, and they would be lost; the round must wait until the launch is
// queued (it then waits for the kernel too: the context, or the launch's mark in scan order). The
// first argument says what the launch scan sees of the kernel:
//   scanned    its parameter layout: it uses m;
//   unscanned  nothing (no layout: in scan order, work no scan sees).
// Every word of m and x is checked after.
#include <atomic>
#include <chrono>
#include <thread>

#include "swap_common.h"

using namespace swap_test;

namespace {

std::atomic<bool> g_started{false}, g_made{false};

// x[i] += 1 into the memory behind x at the start; params: CUdeviceptr x
void slow_inc(void** p) {
  auto* x = static_cast<uint32_t*>(fake_cuda_physical(*static_cast<CUdeviceptr*>(p[0]), 4 * MiB));
  CHECK(x != nullptr);
  g_started = true;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (!g_made && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (size_t i = 0; i < kWords; ++i) x[i] += 1;
}
// The same kernel under another name: one with a layout, one without.
void k_slow_scanned(void** p) { slow_inc(p); }
void k_slow_unscanned(void** p) { slow_inc(p); }

}  // namespace

int main(int argc, char** argv) {
  preload::use_device0();
  declare_kernels();
  const bool scanned = preload::has_arg(argc, argv, "scanned");
  CHECK(scanned || preload::has_arg(argc, argv, "unscanned"));
  const size_t sizes[] = {sizeof(CUdeviceptr)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_slow_scanned), sizes, 1) == 0);
  CUcontext ctx = nullptr;
  CK(cuCtxGetCurrent(&ctx));

  CUdeviceptr m = 0, x = 0, y = 0;
  CK(cuMemAlloc(&m, 4 * MiB));
  put(m, 5);
  CK(cuMemAlloc(&x, 4 * MiB));
  put(x, 7);
  std::thread queuer([&] {
    CK(cuCtxSetCurrent(ctx));
    void* params[] = {&m};
    CK(cuLaunchKernel(preload::as_function(scanned ? k_slow_scanned : k_slow_unscanned), 1, 1, 1, 1, 1, 1, 0, nullptr,
                      params, nullptr));
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g_started && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(g_started);
  // The launch of the scanned kernel made m the most recently used: a use of x here makes m the
  // least recently used again, so that y's room is m's.
  CK(inc(x, nullptr));
  CK(cuMemAlloc(&y, 4 * MiB));
  g_made = true;
  queuer.join();
  put(y, 9);
  CK(cuCtxSynchronize());
  CHECK(holds(m, 5, 1));
  CHECK(holds(x, 7, 1));
  CHECK(holds(y, 9, 0));
  CK(cuMemFree(m));
  CK(cuMemFree(x));
  CK(cuMemFree(y));
  std::printf("swap race ok\n");
  return 0;
}
