// Scenario S4 (SCENARIOS.md): managed memory initialised on the CPU, then one kernel.
//   s4_managed none [GiB]   no hint: pages migrate on GPU faults (run it under the shim for "shim hints")
//   s4_managed hand [GiB]   cudaMemPrefetchAsync of both arrays before the kernel, as an expert would
// Prints one JSON line: bytes moved host-to-device, seconds from launch (or prefetch) to the end of
// the kernel, GB/s, and a checksum of the result read back on the CPU.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e = (x);                                                               \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

__global__ void add(float* a, const float* b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    a[i] = a[i] + 2.0f * b[i];
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "none";
  double gib = argc > 2 ? std::atof(argv[2]) : 4.0;
  size_t n = static_cast<size_t>(gib * (1ull << 30) / 2 / sizeof(float));  // two arrays
  float *a = nullptr, *b = nullptr;
  CHECK(cudaMallocManaged(&a, n * sizeof(float)));
  CHECK(cudaMallocManaged(&b, n * sizeof(float)));
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 1024);
    b[i] = static_cast<float>(i % 7);
  }
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  auto t0 = std::chrono::steady_clock::now();
  if (std::strcmp(mode, "hand") == 0) {
    cudaMemLocation loc{cudaMemLocationTypeDevice, dev};
    CHECK(cudaMemPrefetchAsync(a, n * sizeof(float), loc, 0, s));
    CHECK(cudaMemPrefetchAsync(b, n * sizeof(float), loc, 0, s));
  }
  add<<<132 * 8, 512, 0, s>>>(a, b, n);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(s));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double sum = 0;
  for (size_t i = 0; i < n; i += 4099) sum += a[i];
  size_t bytes = 2 * n * sizeof(float);
  std::printf("{\"mode\": \"%s\", \"bytes\": %zu, \"seconds\": %.4f, \"gbps\": %.2f, \"checksum\": %.1f}\n", mode,
              bytes, secs, bytes / secs / 1e9, sum);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 0;
}
