// Copies out of memory the shim placed on the host are host memcpys (act/copy_host_placed); they
// must still wait for exactly the work the copy would have waited for. Here: a memset on the
// legacy default stream writes a 512 MiB buffer (spilled under GPUMEMSHIM_POLICY=spill and a small
// GPUMEMSHIM_DEVICE_LIMIT), then an async copy on another blocking stream reads it back, which
// CUDA orders after the memset. Every byte must be the memset's value, in every trial; and a
// synchronous copy after a kernel-free async memset on a non-blocking stream, synchronised by an
// event, likewise. Prints "ok" or the number of stale bytes.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e = (x);                                                                       \
    if (e != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

static size_t stale(const unsigned char* h, size_t n, unsigned char v) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += h[i] != v;
  return bad;
}

int main() {
  const size_t n = 512ull << 20;
  unsigned char* m = nullptr;
  CHECK(cudaMalloc(&m, n));
  auto* h = static_cast<unsigned char*>(std::malloc(n));
  cudaStream_t s, nb;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  size_t total = 0;
  for (int t = 0; t < 6; ++t) {
    unsigned char v = static_cast<unsigned char>(17 + t);
    CHECK(cudaMemsetAsync(m, v, n, 0));  // legacy default stream
    CHECK(cudaMemcpyAsync(h, m, n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    total += stale(h, n, v);
    v = static_cast<unsigned char>(101 + t);
    CHECK(cudaMemsetAsync(m, v, n, nb));
    CHECK(cudaEventRecord(ev, nb));
    CHECK(cudaStreamWaitEvent(s, ev, 0));
    CHECK(cudaMemcpyAsync(h, m, n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    total += stale(h, n, v);
  }
  if (total) {
    std::printf("stale bytes: %zu\n", total);
    return 1;
  }
  std::printf("ok\n");
  CHECK(cudaFree(m));
  std::free(h);
  return 0;
}
