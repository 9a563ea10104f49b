// Large-block malloc churn, CPU only (issue 28's stress program): THREADS threads each keep 32 live
// blocks and replace a random one OPS times with a block of 16 B to 4 MiB (log-uniform), writing
// every byte of it. Prints one JSON line: wall seconds and the peak resident memory.
//   gms_bench_malloc_churn [THREADS [OPS]]        (defaults 8 and 4000)
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

void churn(unsigned seed, int ops) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<void*> slots(32, nullptr);
  for (int i = 0; i < ops; ++i) {
    size_t n = static_cast<size_t>(16.0 * std::exp2(u(rng) * 18.0));  // 16 B .. 4 MiB
    void*& slot = slots[rng() % slots.size()];
    std::free(slot);
    slot = std::malloc(n);
    if (!slot) std::abort();
    std::memset(slot, static_cast<int>(i), n);
  }
  for (void* p : slots) std::free(p);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 8;
  int ops = argc > 2 ? std::atoi(argv[2]) : 4000;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(churn, 1234u + static_cast<unsigned>(t), ops);
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("{\"bench\": \"malloc_churn\", \"threads\": %d, \"ops\": %d, \"seconds\": %.4f, \"max_rss_kib\": %ld}\n",
              threads, ops, s, ru.ru_maxrss);
  return 0;
}
