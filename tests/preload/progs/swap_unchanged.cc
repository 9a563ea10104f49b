// Movable memory in scan order over the stand-in driver (run with GPUMEMSHIM_POLICY=swap,
// GPUMEMSHIM_SWAP_ORDER=scan, GPUMEMSHIM_DEVICE_LIMIT=8M: two 4 MiB chunks on the device): a
// chunk brought in keeps its host copy and the sum of what came in (act/swap/sums.h), so that
// - leaving again unchanged (only read since), it is not copied out: its copy is still right;
// - leaving after a kernel changed it, it is copied out, into that same copy;
// - every word survives either way.
#include "swap_common.h"

using namespace swap_test;

namespace {

uint64_t g_read = 0;

// Reads every word of x and changes nothing; params: CUdeviceptr x, size_t count
void k_read(void** p) {
  const uint32_t* x = preload::dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0]));
  size_t n = *static_cast<size_t*>(p[1]);
  for (size_t i = 0; i < n; ++i) g_read += x[i];
}

CUresult read(CUdeviceptr x, CUstream s) {
  size_t n = kWords;
  void* params[] = {&x, &n};
  return cuLaunchKernel(preload::as_function(k_read), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

}  // namespace

int main() {
  preload::use_device0();
  declare_kernels();
  {
    size_t sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
    CHECK(fake_cuda_set_kernel_params(preload::as_function(k_read), sizes, 2) == 0);
  }
  CUstream st = nullptr;
  CK(cuStreamCreate(&st, 0));
  CUdeviceptr a = 0, b = 0, c = 0;
  CK(cuMemAlloc(&a, 4 * MiB));
  CK(cuMemAlloc(&b, 4 * MiB));
  put(a, 1);
  put(b, 2);
  CK(cuMemAlloc(&c, 4 * MiB));  // a, the least recently used, leaves: copied (it never came in)
  put(c, 3);
  // Launches `read` of x and checks the copies its moves made (out and in, side range to side range).
  auto step = [&](const char* what, CUdeviceptr x, unsigned long copies_wanted) {
    Count count("cuMemcpyDtoDAsync_v2");
    CK(read(x, st));
    const unsigned long copies = count.added();
    if (copies != copies_wanted) {
      std::fprintf(stderr, "%s: %lu copies, expected %lu\n", what, copies, copies_wanted);
      std::exit(1);
    }
  };
  step("a in, b out", a, 2);  // b never came in: copied out
  step("b in, c out", b, 2);
  step("c in, a out unchanged", c, 1);  // a was only read: its copy in
  CK(inc(b, st));  // b changes on the device
  step("a in, c out unchanged", a, 1);
  step("c in, b out changed", c, 2);  // b's copy out, c's copy in
  step("b in, a out unchanged", b, 1);
  CHECK(holds(a, 1, 0));
  CHECK(holds(b, 2, 1));
  CHECK(holds(c, 3, 0));
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  CK(cuMemFree(c));
  CK(cuStreamDestroy(st));
  std::printf("swap unchanged ok\n");
  return 0;
}
