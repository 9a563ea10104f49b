// The step learner under policy swap (GPUMEMSHIM_SWAP_LEARN), over the stand-in driver, with 4 MiB
// chunks (GPUMEMSHIM_SWAP_CHUNK=4M). Every checked word is checked at the end; the runner compares
// the shim's counts and trace with the learner on and off.
//   cycle  GPUMEMSHIM_DEVICE_LIMIT=12M (three chunks): four ranges, each used by 70 launches of its
//          own kernel in turn, 16 times. The least recently used range is always the next one used,
//          so by recency every range comes back every time; with the learner, room comes from the
//          range used farthest ahead, and most stay.
//   broken as cycle, but a launch the loop does not otherwise make every fourth time round: the
//          learner starts over each time, and the data stays right.
//   renamed as cycle, but range 0's kernel is launched through another handle every time round,
//          with the same name (as one kernel of a decoding model did on the H100): the same step.
//   ahead  GPUMEMSHIM_DEVICE_LIMIT=16M, scan order: each iteration uses a and b, makes x, y and z
//          (z needs room: b, used again farthest ahead, goes), frees them, and runs a few launches
//          on small memory; with the learner, b comes back during those, ahead of its launch.
#include "swap_common.h"

using namespace swap_test;

namespace {

constexpr size_t kTouched = 16;  // words each launch adds one to (the scan sees the whole range)

// Four kernels that add one to the first words of their range: a different function per range.
template <int K>
void k_touch(void** p) {
  uint32_t* x = preload::dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0]));
  size_t n = *static_cast<size_t*>(p[1]);
  for (size_t i = 0; i < n; ++i) x[i] += 1;
}
void (*const kTouch[4])(void**) = {k_touch<0>, k_touch<1>, k_touch<2>, k_touch<3>};
// Range 0's kernel again, under other handles.
void (*const kTouchAgain[2])(void**) = {k_touch<4>, k_touch<5>};

CUresult touch(int k, CUdeviceptr x, void (*kernel)(void**) = nullptr) {
  size_t n = kTouched;
  void* params[] = {&x, &n};
  return cuLaunchKernel(preload::as_function(kernel ? kernel : kTouch[k]), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
}

// Whether the first words of x hold put(x, seed) plus `plus`.
bool touched(CUdeviceptr x, uint32_t seed, uint32_t plus) {
  std::vector<uint32_t> v(kWords);
  CK(cuMemcpyDtoH(v.data(), x, 4 * MiB));
  for (size_t i = 0; i < kWords; ++i) {
    if (v[i] != seed * 1000003u + static_cast<uint32_t>(i) + (i < kTouched ? plus : 0)) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  preload::use_device0();
  declare_kernels();
  size_t sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
  for (auto k : kTouch) CHECK(fake_cuda_set_kernel_params(preload::as_function(k), sizes, 2) == 0);
  for (auto k : kTouchAgain) CHECK(fake_cuda_set_kernel_params(preload::as_function(k), sizes, 2) == 0);
  const char* names[] = {"touch0", "touch1", "touch2", "touch3"};
  for (int k = 0; k < 4; ++k) CHECK(fake_cuda_set_kernel_name(preload::as_function(kTouch[k]), names[k]) == 0);
  for (auto k : kTouchAgain) CHECK(fake_cuda_set_kernel_name(preload::as_function(k), names[0]) == 0);
  if (preload::has_arg(argc, argv, "ahead")) {
    CUdeviceptr a = 0, b = 0, small = 0;
    CK(cuMemAlloc(&a, 4 * MiB));
    CK(cuMemAlloc(&b, 4 * MiB));
    CK(cuMemAlloc(&small, 64 * 1024));  // below GPUMEMSHIM_MIN_SIZE: ordinary device memory
    put(a, 1);
    put(b, 2);
    const uint32_t iterations = 30;
    for (uint32_t it = 0; it < iterations; ++it) {
      CK(touch(0, a));
      CK(touch(1, b));
      CUdeviceptr x = 0, y = 0, z = 0;
      CK(cuMemAlloc(&x, 4 * MiB));
      CK(touch(2, x));
      CK(cuMemAlloc(&y, 4 * MiB));
      CK(touch(2, y));
      CK(cuMemAlloc(&z, 4 * MiB));
      CK(touch(3, z));
      CK(touch(2, x));
      CK(touch(3, y));
      CK(cuMemFree(x));
      CK(cuMemFree(y));
      CK(cuMemFree(z));
      for (int k = 0; k < 4; ++k) CK(touch(k, small));
    }
    CK(cuCtxSynchronize());
    CHECK(touched(a, 1, iterations));
    CHECK(touched(b, 2, iterations));
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    CK(cuMemFree(small));
    std::printf("swap learn ok\n");
    return 0;
  }
  const bool broken = preload::has_arg(argc, argv, "broken"), renamed = preload::has_arg(argc, argv, "renamed");
  CUdeviceptr r[4] = {};
  for (int k = 0; k < 4; ++k) {
    CK(cuMemAlloc(&r[k], 4 * MiB));
    put(r[k], 10 + k);
  }
  const uint32_t rounds = 16, uses = 70;
  uint32_t extra[4] = {};
  for (uint32_t round = 0; round < rounds; ++round) {
    for (int k = 0; k < 4; ++k) {
      for (uint32_t u = 0; u < uses; ++u) CK(touch(k, r[k], renamed && k == 0 ? kTouchAgain[round % 2] : nullptr));
    }
    if (broken && round % 4 == 3) {
      CK(touch(0, r[1]));  // range 1 with range 0's kernel: off the loop
      ++extra[1];
    }
  }
  CK(cuCtxSynchronize());
  for (int k = 0; k < 4; ++k) CHECK(touched(r[k], 10 + k, rounds * uses + extra[k]));
  for (int k = 0; k < 4; ++k) CK(cuMemFree(r[k]));
  std::printf("swap learn ok\n");
  return 0;
}
