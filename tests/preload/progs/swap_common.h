#pragma once
// Shared by the movable-memory programs (swap.cc, swap_scan.cc): 4 MiB ranges, a kernel that adds
// one to every word, and a fill and a check of every word through copies.
#include <vector>

#include "common.h"

namespace swap_test {

constexpr size_t MiB = 1u << 20;
constexpr size_t kWords = 4 * MiB / sizeof(uint32_t);

using Count = preload::CallCount;
// Position of the stand-in driver's latest call of `s`: call order.
inline unsigned long last(const char* s) { return fake_cuda_last_call(s); }

// x[i] += 1; params: CUdeviceptr x, size_t count
inline void k_inc(void** p) {
  uint32_t* x = preload::dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0]));
  size_t n = *static_cast<size_t*>(p[1]);
  for (size_t i = 0; i < n; ++i) x[i] += 1;
}

// Tells the stand-in driver k_inc's parameter layout, as the launch scan reads it.
inline void declare_kernels() {
  size_t sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_inc), sizes, 2) == 0);
}

inline CUresult inc(CUdeviceptr x, CUstream s) {
  size_t n = kWords;
  void* params[] = {&x, &n};
  return cuLaunchKernel(preload::as_function(k_inc), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

inline void put(CUdeviceptr x, uint32_t seed) {
  std::vector<uint32_t> v(kWords);
  for (size_t i = 0; i < kWords; ++i) v[i] = seed * 1000003u + static_cast<uint32_t>(i);
  CK(cuMemcpyHtoD(x, v.data(), 4 * MiB));
}

// Whether x holds put(x, seed) plus `plus` in every word.
inline bool holds(CUdeviceptr x, uint32_t seed, uint32_t plus) {
  std::vector<uint32_t> v(kWords);
  CK(cuMemcpyDtoH(v.data(), x, 4 * MiB));
  for (size_t i = 0; i < kWords; ++i) {
    if (v[i] != seed * 1000003u + static_cast<uint32_t>(i) + plus) return false;
  }
  return true;
}

}  // namespace swap_test
