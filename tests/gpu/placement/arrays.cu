// CUDA arrays under a device budget (run under the shim with GPUMEMSHIM_DEVICE_LIMIT=256M): an
// array counts against the budget from cudaMallocArray to cudaFreeArray (cudaMemGetInfo's free
// shrinks by its size), its texels read back as written, and one past the budget is refused with
// cudaErrorMemoryAllocation, as on a card of the budget's size, after which the program goes on.
// The device-side malloc heap likewise: grown by 64 MiB it counts, and kernels' malloc works in it;
// 512 MiB is refused, and the heap keeps its size. Prints "ok", or what failed.
#include <vector>

#include "checks.cuh"

// Each thread mallocs 1 KiB from the device heap, writes it, and says whether it got it.
__global__ void heap_user(int* got) {
  char* p = static_cast<char*>(malloc(1024));
  if (p) {
    for (int i = 0; i < 1024; ++i) p[i] = static_cast<char>(i);
    free(p);
  }
  got[blockIdx.x * blockDim.x + threadIdx.x] = p != nullptr;
}

int main() {
  constexpr size_t MiB = 1 << 20, W = 4096, H = 4096;  // 64 MiB of floats
  size_t free0 = 0, total = 0, free1 = 0;
  CHECK(cudaMemGetInfo(&free0, &total));
  EXPECT(total == 256 * MiB);
  cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
  cudaArray_t a = nullptr;
  CHECK(cudaMallocArray(&a, &f, W, H));
  CHECK(cudaMemGetInfo(&free1, &total));
  EXPECT(free1 + 64 * MiB == free0);
  std::vector<float> in(W * H), out(W * H, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 100003) * 0.5f;
  CHECK(cudaMemcpy2DToArray(a, 0, 0, in.data(), W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2DFromArray(out.data(), W * sizeof(float), a, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToHost));
  EXPECT(in == out);
  // 512 MiB of uchar4 in 3D: past the budget.
  cudaArray_t big = nullptr;
  cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
  cudaError_t e = cudaMalloc3DArray(&big, &u4, make_cudaExtent(1024, 1024, 128), 0);
  EXPECT(e == cudaErrorMemoryAllocation);
  EXPECT(big == nullptr);
  cudaGetLastError();
  CHECK(cudaFreeArray(a));
  CHECK(cudaMemGetInfo(&free1, &total));
  EXPECT(free1 == free0);

  size_t heap0 = 0, heap = 0;
  CHECK(cudaDeviceGetLimit(&heap0, cudaLimitMallocHeapSize));
  CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap0 + 64 * MiB));
  CHECK(cudaMemGetInfo(&free1, &total));
  EXPECT(free1 + 64 * MiB == free0);
  EXPECT(cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap0 + 512 * MiB) == cudaErrorMemoryAllocation);
  cudaGetLastError();
  CHECK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
  EXPECT(heap == heap0 + 64 * MiB);
  int* got = nullptr;
  CHECK(cudaMallocManaged(&got, 128 * 256 * sizeof(int)));
  heap_user<<<128, 256>>>(got);  // 32 MiB of 1 KiB pieces: more than the heap had, fits in the grown one
  CHECK(cudaDeviceSynchronize());
  int n = 0;
  for (int i = 0; i < 128 * 256; ++i) n += got[i];
  EXPECT(n == 128 * 256);
  CHECK(cudaFree(got));
  std::printf("ok\n");
  return 0;
}
