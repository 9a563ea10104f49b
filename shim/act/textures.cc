#include "textures.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "core/guard.h"
#include "core/ledger.h"
#include "driver/calls.h"

namespace gms::act {

namespace {

constexpr int kMaxDevices = DeviceLedger::kMaxDevices;

struct Textures {
  std::mutex mu;
  std::unordered_map<uint64_t, uintptr_t> by_device[kMaxDevices];
};

Textures& textures() {
  static NoDestructor<Textures> t;
  return *t;
}

std::atomic<int64_t> g_count{0};

}  // namespace

void texture_made(CUtexObject tex, uintptr_t base) {
  ShimScope scope;
  const int dev = driver::current_device();
  if (dev < 0 || dev >= kMaxDevices) return;
  Textures& t = textures();
  std::lock_guard lock(t.mu);
  if (t.by_device[dev].insert_or_assign(tex, base).second) g_count.fetch_add(1, std::memory_order_relaxed);
}

uintptr_t texture_gone(CUtexObject tex) {
  ShimScope scope;
  const int dev = driver::current_device();
  if (dev < 0 || dev >= kMaxDevices) return 0;
  Textures& t = textures();
  std::lock_guard lock(t.mu);
  auto it = t.by_device[dev].find(tex);
  if (it == t.by_device[dev].end()) return 0;
  const uintptr_t base = it->second;
  t.by_device[dev].erase(it);
  g_count.fetch_sub(1, std::memory_order_relaxed);
  return base;
}

uintptr_t texture_memory(int dev, uint64_t handle) {
  if (g_count.load(std::memory_order_relaxed) == 0 || dev < 0 || dev >= kMaxDevices) return 0;
  Textures& t = textures();
  std::lock_guard lock(t.mu);
  auto it = t.by_device[dev].find(handle);
  return it == t.by_device[dev].end() ? 0 : it->second;
}

}  // namespace gms::act
