// Build: g++ -O2 -std=c++20 -I . docs/analysis/launch-cost/arena_bench.cc policy/arena.cc -o arena_bench
// Offline: Arena find/take/give/settle per operation under churn like a PyTorch step (300 to 600
// live allocations of 1 to 48 MiB over 400 device-backed chunks, every free tagged, tags settled
// eight frees later). On the H100 the Llama-style step at an 80G budget measured, per allocation
// and free, find 3.5 us, take 1.5, give 1.2 and settle 2.7 (phase timers, 2026-11-27).
// Here, this machine (2 cores, other work beside it), before: find 3.4 to 4.2 us, take 0.4,
// give 0.4, settle 1.2 to 1.6; after the stretch index and per-chunk settling: find 0.11, take
// 0.6 to 0.7, give 0.7, settle 0.09.
#include <chrono>
#include <cstdio>
#include <deque>
#include <vector>
#include "policy/arena.h"
using namespace gms::policy;
int main() {
  constexpr uint64_t MiB = 1ull << 20;
  Arena a(Arena::Config{64 * MiB, 2 * MiB, 3000});
  for (uint64_t c = 0; c < 400; ++c) a.set_backing(c, Arena::Backing::device);
  uint32_t x = 7;
  auto next = [&](uint32_t n) { x = x * 1103515245u + 12345u; return (x >> 8) % n; };
  std::vector<uint64_t> live;
  std::deque<Arena::Tag> pending;
  Arena::Tag tag = 0;
  double t_find = 0, t_take = 0, t_give = 0, t_settle = 0;
  long n_alloc = 0, n_free = 0;
  auto now = [] { return std::chrono::steady_clock::now(); };
  for (int op = 0; op < 200000; ++op) {
    if (live.size() < 600 && (live.size() < 300 || next(2))) {
      const uint64_t bytes = (1 + next(48)) * MiB;
      auto t0 = now();
      Arena::Spot s = a.find(bytes, true);
      auto t1 = now();
      if (!s.ok) s = a.find(bytes, false);
      Arena::Grant g;
      if (s.ok && a.take(s.offset, s.size, &g)) live.push_back(s.offset);
      auto t2 = now();
      t_find += std::chrono::duration<double, std::micro>(t1 - t0).count();
      t_take += std::chrono::duration<double, std::micro>(t2 - t1).count();
      ++n_alloc;
    } else if (!live.empty()) {
      const size_t k = next(static_cast<uint32_t>(live.size()));
      auto t0 = now();
      a.give(live[k], ++tag);
      auto t1 = now();
      pending.push_back(tag);
      while (pending.size() > 8) { a.settle(pending.front()); pending.pop_front(); }
      auto t2 = now();
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      t_give += std::chrono::duration<double, std::micro>(t1 - t0).count();
      t_settle += std::chrono::duration<double, std::micro>(t2 - t1).count();
      ++n_free;
    }
  }
  std::printf("per alloc: find %.2f us, take %.2f us; per free: give %.2f us, settle %.2f us\n", t_find / n_alloc,
              t_take / n_alloc, t_give / n_free, t_settle / n_free);
}
