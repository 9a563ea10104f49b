#include "act/made_again.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "core/guard.h"
#include "driver/budget.h"

namespace gms::act {
namespace {

// Uses that make an allocation working memory: XLA's one buffer of a step's temporaries is used by
// every kernel of the step; an array streamed once a pass, by a few.
constexpr uint32_t kWorkingUses = 8;

struct Uses {
  uint32_t scans = 0;
  uint64_t unscanned_at = 0;  // g_unscanned when it was made (or first seen)
};

std::atomic<uint64_t> g_unscanned{0};

// Large allocations are few: one lock, never held while calling out.
std::mutex& uses_mu() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::unordered_map<uintptr_t, Uses>& uses() {
  static auto* u = new std::unordered_map<uintptr_t, Uses>();
  return *u;
}

// The sizes, with their device, of the latest frees of working memory: a small ring, written and
// read without a lock (a lost entry costs one allocation its placement as a large one).
constexpr size_t kSlots = 16;
std::atomic<uint64_t> g_sizes[kSlots];
std::atomic<uint32_t> g_next{0};

// 2 MiB steps, and the device in the low byte.
uint64_t size_class(uint64_t bytes, int dev) {
  return ((bytes + (2ull << 20) - 1) >> 21) << 8 | (static_cast<uint64_t>(dev) & 0xff);
}

}  // namespace

void large_made(uintptr_t base) {
  ShimScope scope;
  std::lock_guard lock(uses_mu());
  uses()[base] = Uses{0, g_unscanned.load(std::memory_order_relaxed)};
}

void large_used(uintptr_t base) {
  ShimScope scope;
  std::lock_guard lock(uses_mu());
  auto [it, fresh] = uses().try_emplace(base);
  if (fresh) it->second.unscanned_at = g_unscanned.load(std::memory_order_relaxed);
  ++it->second.scans;
}

void unscanned_work() { g_unscanned.fetch_add(1, std::memory_order_relaxed); }

void large_freed(const Region& r) {
  if (r.device < 0 || r.size <= budget::limit(r.device) / 4) return;
  uint64_t n = 0;
  {
    ShimScope scope;
    std::lock_guard lock(uses_mu());
    auto it = uses().find(r.base);
    if (it == uses().end()) return;
    n = it->second.scans + (g_unscanned.load(std::memory_order_relaxed) - it->second.unscanned_at);
    uses().erase(it);
  }
  if (n < kWorkingUses) return;
  g_sizes[g_next.fetch_add(1, std::memory_order_relaxed) % kSlots].store(size_class(r.size, r.device),
                                                                        std::memory_order_relaxed);
}

bool made_again(uint64_t bytes, int dev) {
  const uint64_t c = size_class(bytes, dev);
  for (const auto& s : g_sizes) {
    if (s.load(std::memory_order_relaxed) == c) return true;
  }
  return false;
}

}  // namespace gms::act
