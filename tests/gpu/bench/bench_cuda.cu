// CUDA benchmarks of the shim's cost on the driver's hot paths. The driver (bench.py) runs each
// with and without LD_PRELOAD, alternating, and compares the medians.
//
//   gms_bench_cuda launch [launches=200000] [rounds=3]   empty-kernel launches; time on the host
//                                                        from the first launch to after the sync
//   gms_bench_cuda alloc [pairs=5000] [rounds=3] [bytes=1048576]   cudaMalloc+cudaFree pairs
//
// Output: one JSON line, {"bench": ..., "unit": ..., "value": <median of the rounds>, ...}.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace {

void check(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "gms_bench_cuda: %s failed at line %d: %s\n", what, line, cudaGetErrorString(e));
    std::exit(1);
  }
}
#define CHECK(call) check((call), #call, __LINE__)

__global__ void empty_kernel() {}

double now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

size_t arg(int argc, char** argv, int i, size_t def, size_t max) {
  if (i >= argc) return def;
  char* end = nullptr;
  unsigned long long v = std::strtoull(argv[i], &end, 10);
  if (!end || *end || v == 0 || v > max) {
    std::fprintf(stderr, "gms_bench_cuda: bad argument '%s' (1..%zu)\n", argv[i], max);
    std::exit(2);
  }
  return static_cast<size_t>(v);
}

void report(const char* bench, const char* unit, size_t count, std::vector<double> ns) {
  std::vector<double> sorted = ns;
  std::sort(sorted.begin(), sorted.end());
  std::printf("{\"bench\": \"%s\", \"unit\": \"%s\", \"value\": %.4f, \"count\": %zu, \"rounds\": [", bench, unit,
              sorted[sorted.size() / 2], count);
  for (size_t r = 0; r < ns.size(); ++r) std::printf("%s%.4f", r ? ", " : "", ns[r]);
  std::printf("]}\n");
}

void launches(size_t n, size_t rounds) {
  for (int i = 0; i < 2000; ++i) empty_kernel<<<1, 1>>>();  // warm: module load, queues
  CHECK(cudaDeviceSynchronize());
  std::vector<double> ns;
  for (size_t r = 0; r < rounds; ++r) {
    double t0 = now_ns();
    for (size_t i = 0; i < n; ++i) empty_kernel<<<1, 1>>>();
    CHECK(cudaDeviceSynchronize());
    ns.push_back((now_ns() - t0) / static_cast<double>(n));
    CHECK(cudaGetLastError());
  }
  report("launch", "ns/launch", n, ns);
}

void allocs(size_t pairs, size_t rounds, size_t bytes) {
  void* p = nullptr;
  for (int i = 0; i < 100; ++i) {  // warm: context, allocator
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaFree(p));
  }
  std::vector<double> ns;
  for (size_t r = 0; r < rounds; ++r) {
    double t0 = now_ns();
    for (size_t i = 0; i < pairs; ++i) {
      CHECK(cudaMalloc(&p, bytes));
      CHECK(cudaFree(p));
    }
    ns.push_back((now_ns() - t0) / static_cast<double>(pairs));
  }
  report("cuda_alloc", "ns/pair", pairs, ns);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "launch") == 0) {
    launches(arg(argc, argv, 2, 200000, 10000000), arg(argc, argv, 3, 3, 50));
  } else if (argc >= 2 && std::strcmp(argv[1], "alloc") == 0) {
    allocs(arg(argc, argv, 2, 5000, 1000000), arg(argc, argv, 3, 3, 50), arg(argc, argv, 4, 1 << 20, 1ull << 30));
  } else {
    std::fprintf(stderr, "usage: gms_bench_cuda launch [launches] [rounds] | alloc [pairs] [rounds] [bytes]\n");
    return 2;
  }
  return 0;
}
