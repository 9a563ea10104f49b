// For tests/gpu/test_trace.py: one copy of each kind the trace must tell apart, each of N MiB (default
// 64): host-to-device from pageable (malloc) and from pinned (cudaMallocHost) memory, then
// device-to-host into each. Checks the data and prints one JSON line with the byte count.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

int main(int argc, char** argv) {
  size_t bytes = static_cast<size_t>(argc > 1 ? std::atoi(argv[1]) : 64) << 20;
  auto* pageable = static_cast<unsigned char*>(std::malloc(bytes));
  unsigned char* pinned = nullptr;
  unsigned char* dev = nullptr;
  if (!pageable) return 1;
  CHECK(cudaMallocHost(&pinned, bytes));
  CHECK(cudaMalloc(&dev, bytes));
  for (size_t i = 0; i < bytes; ++i) {
    pageable[i] = static_cast<unsigned char>(i * 7);
    pinned[i] = static_cast<unsigned char>(i * 13);
  }
  CHECK(cudaMemcpy(dev, pageable, bytes, cudaMemcpyHostToDevice));  // pageable -> device
  CHECK(cudaMemcpy(pinned, dev, bytes, cudaMemcpyDeviceToHost));    // device -> pinned
  for (size_t i = 0; i < bytes; i += 4093) {
    if (pinned[i] != static_cast<unsigned char>(i * 7)) return 2;
  }
  for (size_t i = 0; i < bytes; ++i) pinned[i] = static_cast<unsigned char>(i * 13);
  CHECK(cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice));    // pinned -> device
  CHECK(cudaMemcpy(pageable, dev, bytes, cudaMemcpyDeviceToHost));  // device -> pageable
  for (size_t i = 0; i < bytes; i += 4093) {
    if (pageable[i] != static_cast<unsigned char>(i * 13)) return 3;
  }
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(pinned));
  std::free(pageable);
  std::printf("{\"bytes\": %zu}\n", bytes);
  return 0;
}
