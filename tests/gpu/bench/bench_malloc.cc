// 64-byte malloc+free pairs: what the shim's host hooks cost on the hottest path a program has.
// CPU only: runs on any machine. The driver (bench.py) runs it with and without LD_PRELOAD.
//
//   gms_bench_malloc [pairs] [rounds]      times `pairs` pairs `rounds` times; prints the median
//   gms_bench_malloc --callgrind [pairs]   runs the loop once, counting instructions only inside
//                                          it (valgrind --tool=callgrind --instr-atstart=no)
//   gms_bench_malloc --has-callgrind-macros   prints 1 when built with <valgrind/callgrind.h>
//
// Without <valgrind/callgrind.h>, count the loop with --toggle-collect=gms_bench_malloc_loop.
// Output: one JSON line, {"bench": "malloc64", "unit": "ns/pair", "value": <median>, ...}.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
#include <algorithm>

#if GMS_HAVE_CALLGRIND_H
#include <valgrind/callgrind.h>
#define GMS_CALLGRIND_START() CALLGRIND_START_INSTRUMENTATION
#define GMS_CALLGRIND_STOP() CALLGRIND_STOP_INSTRUMENTATION
#else
#define GMS_CALLGRIND_START() ((void)0)
#define GMS_CALLGRIND_STOP() ((void)0)
#define GMS_HAVE_CALLGRIND_H 0
#endif

// Not inlined and not static: callgrind's --toggle-collect finds it by this name.
extern "C" __attribute__((noinline)) void gms_bench_malloc_loop(size_t pairs) {
  for (size_t i = 0; i < pairs; ++i) {
    void* p = malloc(64);
    // The pointer escapes into an opaque asm: the compiler may not drop the malloc/free pair.
    asm volatile("" : : "r"(p) : "memory");
    free(p);
  }
}

namespace {

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
    std::fprintf(stderr, "gms_bench_malloc: bad argument '%s' (1..%zu)\n", argv[i], max);
    std::exit(2);
  }
  return static_cast<size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--has-callgrind-macros") == 0) {
    std::printf("%d\n", GMS_HAVE_CALLGRIND_H ? 1 : 0);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--callgrind") == 0) {
    size_t pairs = arg(argc, argv, 2, 100000, 100000000);
    gms_bench_malloc_loop(1000);  // warm: first-use costs of the allocator (and any preload) stay out
    GMS_CALLGRIND_START();
    gms_bench_malloc_loop(pairs);
    GMS_CALLGRIND_STOP();
    // With the macros only the timed loop is counted; with --toggle-collect every call of the loop
    // function is, the warm-up included.
    std::printf("{\"bench\": \"malloc64_callgrind\", \"pairs\": %zu, \"macros\": %d, \"toggle_pairs\": %zu}\n",
                pairs, GMS_HAVE_CALLGRIND_H ? 1 : 0, pairs + 1000);
    return 0;
  }
  size_t pairs = arg(argc, argv, 1, 20000000, 1000000000);
  size_t rounds = arg(argc, argv, 2, 5, 100);
  gms_bench_malloc_loop(pairs / 10 + 1);  // warm
  std::vector<double> ns;
  for (size_t r = 0; r < rounds; ++r) {
    double t0 = now_ns();
    gms_bench_malloc_loop(pairs);
    ns.push_back((now_ns() - t0) / static_cast<double>(pairs));
  }
  std::vector<double> sorted = ns;
  std::sort(sorted.begin(), sorted.end());
  std::printf("{\"bench\": \"malloc64\", \"unit\": \"ns/pair\", \"value\": %.4f, \"pairs\": %zu, \"rounds\": [", sorted[sorted.size() / 2], pairs);
  for (size_t r = 0; r < ns.size(); ++r) std::printf("%s%.4f", r ? ", " : "", ns[r]);
  std::printf("]}\n");
  return 0;
}
