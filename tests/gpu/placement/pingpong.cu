// Managed memory whose migrations are known by construction (issue 29, scenario S4):
//   pingpong ping [MiB] [rounds] [hint]   rounds of: a kernel adds 1 to every float, then the CPU adds
//                                          1 to one float in every 4 KiB page. hint: none (as a
//                                          newcomer writes it), hand (an expert's prefetches both
//                                          ways), remote (preferred location host, accessed by the GPU)
//   pingpong touch [MiB] [blocks]          CPU-initialised, one kernel reads and writes every float
//                                          (264 blocks of 512 threads unless given: few blocks fault
//                                          slowly enough for CUPTI to record every migration)
//   pingpong readback [MiB] [pages]        as touch, then the CPU reads one float in each of the first
//                                          `pages` 4 KiB pages
// Prints one JSON line: what was asked, the seconds (the ping-pong rounds only, or the kernel), the
// bytes the GPU and the CPU touched, and a check that every value is what the rounds made it.
#include <cuda_runtime.h>

#include <chrono>
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

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kPerPage = kPage / sizeof(float);

__global__ void add_one(float* a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    a[i] += 1.0f;
  }
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void launch(float* a, size_t n, cudaStream_t s, unsigned blocks = 264) {
  add_one<<<blocks, 512, 0, s>>>(a, n);
  CHECK(cudaGetLastError());
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "ping";
  const size_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 256;
  const size_t n = mib * (1ull << 20) / sizeof(float);
  const size_t pages = n / kPerPage;
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  float* a = nullptr;
  CHECK(cudaMallocManaged(&a, n * sizeof(float)));
  // Every value starts as its index modulo 1000 (exact in a float), written by the CPU.
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<float>(i % 1000);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  double secs = 0, sum = 0;
  size_t gpu_bytes = 0, cpu_pages = 0, bad = 0, rounds = 0;
  const char* hint = "none";
  if (std::strcmp(mode, "ping") == 0) {
    rounds = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 20;
    hint = argc > 4 ? argv[4] : "none";
    const cudaMemLocation gpu{cudaMemLocationTypeDevice, dev}, cpu{cudaMemLocationTypeHost, 0};
    if (std::strcmp(hint, "remote") == 0) {
      CHECK(cudaMemAdvise(a, n * sizeof(float), cudaMemAdviseSetPreferredLocation, cpu));
      CHECK(cudaMemAdvise(a, n * sizeof(float), cudaMemAdviseSetAccessedBy, gpu));
    }
    const bool hand = std::strcmp(hint, "hand") == 0;
    const double t0 = now();
    for (size_t r = 0; r < rounds; ++r) {
      if (hand) CHECK(cudaMemPrefetchAsync(a, n * sizeof(float), gpu, 0, s));
      launch(a, n, s);
      if (hand) CHECK(cudaMemPrefetchAsync(a, n * sizeof(float), cpu, 0, s));
      CHECK(cudaStreamSynchronize(s));
      for (size_t p = 0; p < pages; ++p) a[p * kPerPage] += 1.0f;
    }
    secs = now() - t0;
    gpu_bytes = rounds * n * sizeof(float);
    cpu_pages = rounds * pages;
    // Each value: its start plus one a round, plus one a round for the first float of each page.
    for (size_t i = 0; i < n; ++i) {
      float want = static_cast<float>(i % 1000) + static_cast<float>(rounds) * (i % kPerPage == 0 ? 2 : 1);
      bad += a[i] != want;
      sum += a[i];
    }
  } else if (std::strcmp(mode, "touch") == 0 || std::strcmp(mode, "readback") == 0) {
    const unsigned blocks = std::strcmp(mode, "touch") == 0 && argc > 3 ? std::atoi(argv[3]) : 264;
    const double t0 = now();
    launch(a, n, s, blocks > 0 ? blocks : 264);
    CHECK(cudaStreamSynchronize(s));
    secs = now() - t0;
    gpu_bytes = n * sizeof(float);
    if (std::strcmp(mode, "readback") == 0) {
      cpu_pages = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : pages;
      if (cpu_pages > pages) cpu_pages = pages;
      for (size_t p = 0; p < cpu_pages; ++p) {
        const size_t i = p * kPerPage;
        bad += a[i] != static_cast<float>(i % 1000) + 1;
        sum += a[i];
      }
    }
  } else {
    std::fprintf(stderr, "pingpong: unknown mode '%s' (ping, touch or readback)\n", mode);
    return 2;
  }
  std::printf(
      "{\"mode\": \"%s\", \"hint\": \"%s\", \"bytes\": %zu, \"rounds\": %zu, \"seconds\": %.4f, "
      "\"gpu_bytes\": %zu, \"cpu_pages\": %zu, \"bad\": %zu, \"checksum\": %.1f}\n",
      mode, hint, n * sizeof(float), rounds, secs, gpu_bytes, cpu_pages, bad, sum);
  CHECK(cudaFree(a));
  return bad == 0 ? 0 : 1;
}
