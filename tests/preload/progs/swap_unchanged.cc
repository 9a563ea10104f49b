// Movable memory in scan order over the stand-in driver (run with GPUMEMSHIM_POLICY=swap,
// GPUMEMSHIM_SWAP_ORDER=scan, GPUMEMSHIM_DEVICE_LIMIT=8M: two 4 MiB chunks on the device): a
// chunk brought in keeps its host copy and the sum of what came in (act/swap/sums.h), so that
// - leaving again unchanged (only read since), it is not copied out: its copy is still right;
// - leaving after a kernel changed it, it is copied out, into that same copy;
// - leaving after a kernel changed one of its two 2 MiB pieces, only that piece is copied out;
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

// Adds one to every word of x's second half; params: CUdeviceptr x, size_t count (of the whole)
void k_inc_tail(void** p) {
  uint32_t* x = preload::dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0]));
  size_t n = *static_cast<size_t*>(p[1]);
  for (size_t i = n / 2; i < n; ++i) x[i] += 1;
}

CUresult inc_tail(CUdeviceptr x, CUstream s) {
  size_t n = kWords;
  void* params[] = {&x, &n};
  return cuLaunchKernel(preload::as_function(k_inc_tail), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

// Whether x holds put(x, seed) plus `head` in its first half and `tail` in its second.
bool holds_halves(CUdeviceptr x, uint32_t seed, uint32_t head, uint32_t tail) {
  std::vector<uint32_t> v(kWords);
  CK(cuMemcpyDtoH(v.data(), x, 4 * MiB));
  for (size_t i = 0; i < kWords; ++i) {
    if (v[i] != seed * 1000003u + static_cast<uint32_t>(i) + (i < kWords / 2 ? head : tail)) return false;
  }
  return true;
}

}  // namespace

int main() {
  preload::use_device0();
  declare_kernels();
  {
    size_t sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
    CHECK(fake_cuda_set_kernel_params(preload::as_function(k_read), sizes, 2) == 0);
    CHECK(fake_cuda_set_kernel_params(preload::as_function(k_inc_tail), sizes, 2) == 0);
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
  CK(inc_tail(b, st));  // b's second piece changes
  step("a in, c out unchanged", a, 1);
  const unsigned long long before = fake_cuda_dtod_async_bytes();
  step("c in, b out, one piece changed", c, 2);
  if (fake_cuda_dtod_async_bytes() - before != 6 * MiB) {  // c's 4 MiB in, b's changed 2 MiB out
    std::fprintf(stderr, "b out, one piece changed: %llu bytes copied, expected 6 MiB\n", fake_cuda_dtod_async_bytes() - before);
    return 1;
  }
  CHECK(holds(a, 1, 0));
  CHECK(holds_halves(b, 2, 1, 2));
  CHECK(holds(c, 3, 0));
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  CK(cuMemFree(c));
  CK(cuStreamDestroy(st));
  std::printf("swap unchanged ok\n");
  return 0;
}
