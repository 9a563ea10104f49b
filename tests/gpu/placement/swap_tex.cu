// Kernels that read memory through texture objects, a linear one and a pitched one, over 64 MiB
// buffers, six of them: under policy swap with a 128 MiB budget (two 64 MiB chunks) the first four
// are evicted by the time the kernels run, and with GPUMEMSHIM_SWAP_PARK=on nothing is mapped at
// their place. A texture object is a handle, not a pointer, so the launch scan must take it for the
// memory it reads (act/residency.h, texture_made), or the kernel faults. Every word is checked.
// Prints "ok", or where it failed.
#include <cstdint>
#include <vector>

#include "checks.cuh"

namespace {

constexpr size_t kBytes = size_t{64} << 20;
constexpr size_t kN = kBytes / sizeof(uint32_t);
constexpr int kW = 4096, kH = static_cast<int>(kN / kW);  // the pitched view: rows of 16 KiB

uint32_t pattern(uint32_t seed, size_t i) { return seed * 1000003u + static_cast<uint32_t>(i); }

__global__ void via_linear(cudaTextureObject_t t, uint32_t* out, size_t n, uint32_t plus) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    out[i] = tex1Dfetch<uint32_t>(t, static_cast<int>(i)) + plus;
  }
}

__global__ void via_pitched(cudaTextureObject_t t, uint32_t* out, uint32_t plus) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kN; i += size_t{gridDim.x} * blockDim.x) {
    const int x = static_cast<int>(i % kW), y = static_cast<int>(i / kW);
    out[i] = tex2D<uint32_t>(t, x + 0.5f, y + 0.5f) + plus;
  }
}

bool holds(const uint32_t* d, uint32_t seed, uint32_t plus) {
  std::vector<uint32_t> h(kN);
  if (cudaMemcpy(h.data(), d, kBytes, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  for (size_t i = 0; i < kN; ++i) {
    if (h[i] != pattern(seed, i) + plus) return false;
  }
  return true;
}

}  // namespace

int main() {
  uint32_t* x[6] = {};
  std::vector<uint32_t> h(kN);
  for (uint32_t k = 0; k < 6; ++k) {
    CHECK(cudaMalloc(&x[k], kBytes));
    for (size_t i = 0; i < kN; ++i) h[i] = pattern(k, i);
    CHECK(cudaMemcpy(x[k], h.data(), kBytes, cudaMemcpyHostToDevice));
  }
  cudaTextureDesc td = {};
  td.readMode = cudaReadModeElementType;
  td.filterMode = cudaFilterModePoint;
  cudaResourceDesc linear = {};
  linear.resType = cudaResourceTypeLinear;
  linear.res.linear.devPtr = x[0];
  linear.res.linear.desc = cudaCreateChannelDesc<uint32_t>();
  linear.res.linear.sizeInBytes = kBytes;
  cudaResourceDesc pitched = {};
  pitched.resType = cudaResourceTypePitch2D;
  pitched.res.pitch2D.devPtr = x[1];
  pitched.res.pitch2D.desc = cudaCreateChannelDesc<uint32_t>();
  pitched.res.pitch2D.width = kW;
  pitched.res.pitch2D.height = kH;
  pitched.res.pitch2D.pitchInBytes = kW * sizeof(uint32_t);
  cudaTextureObject_t a = 0, b = 0;
  CHECK(cudaCreateTextureObject(&a, &linear, &td, nullptr));
  CHECK(cudaCreateTextureObject(&b, &pitched, &td, nullptr));

  via_linear<<<264, 256>>>(a, x[4], kN, 1);
  CHECK(cudaGetLastError());
  via_pitched<<<264, 256>>>(b, x[5], 2);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  EXPECT(holds(x[4], 0, 1));
  EXPECT(holds(x[5], 1, 2));
  // And again, with x[2] behind the linear texture: made after a's handle was given back.
  CHECK(cudaDestroyTextureObject(a));
  linear.res.linear.devPtr = x[2];
  CHECK(cudaCreateTextureObject(&a, &linear, &td, nullptr));
  via_linear<<<264, 256>>>(a, x[3], kN, 3);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  EXPECT(holds(x[3], 2, 3));
  for (uint32_t k : {0u, 1u, 2u}) EXPECT(holds(x[k], k, 0));
  CHECK(cudaDestroyTextureObject(a));
  CHECK(cudaDestroyTextureObject(b));
  for (uint32_t* p : x) CHECK(cudaFree(p));
  std::printf("ok\n");
  return 0;
}
