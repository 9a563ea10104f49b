#pragma once
// What the placement test programs (rules.cu, two_gpus.cu, arrays.cu) share: checks that print where and why
// they failed and make main return 1 (the pytest runner shows stdout), and two grid-stride kernels.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>

#define CHECK(call)                                                                             \
  do {                                                                                          \
    cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess) {                                                                    \
      std::printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));         \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)
#define EXPECT(cond)                                                     \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::printf("%s:%d: expected %s\n", __FILE__, __LINE__, #cond);    \
      return 1;                                                          \
    }                                                                    \
  } while (0)

__global__ void fill(float* x, size_t n, float v) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) x[i] = v;
}
__global__ void add(float* dst, const float* a, const float* b, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) dst[i] = a[i] + b[i];
}
