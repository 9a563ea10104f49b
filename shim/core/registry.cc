#include "registry.h"

#include <mutex>

namespace gms {

const char* mem_kind_name(MemKind k) {
  switch (k) {
#define GMS_X(id, name, doc) \
  case MemKind::id:          \
    return name;
    GMS_MEM_KINDS(GMS_X)
#undef GMS_X
  }
  return "?";
}

const char* origin_name(Origin o) {
  static const char* const kNames[] = {
      "cuMemAlloc", "cuMemAllocPitch", "cuMemAllocManaged", "cuMemAllocAsync", "cuMemAllocFromPoolAsync",
      "cuMemHostAlloc", "cuMemAllocHost", "cuMemHostRegister", "cuMemMap", "cuGraphAddMemAllocNode",
      "malloc", "calloc", "realloc", "memalign", "mmap_anon", "mmap_file", "mremap",
  };
  auto i = static_cast<size_t>(o);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::passthrough:
      return "passthrough";
    case Placement::device:
      return "device";
    case Placement::managed:
      return "managed";
    case Placement::pinned:
      return "pinned";
    case Placement::swap:
      return "swap";
  }
  return "?";
}

std::map<uintptr_t, Region>::iterator Registry::first_overlap(uintptr_t lo, uintptr_t hi) {
  auto it = map_.upper_bound(lo);
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end() > lo) return prev;
  }
  return (it != map_.end() && it->first < hi) ? it : map_.end();
}

size_t Registry::insert(const Region& r) {
  std::unique_lock lock(mu_);
  size_t stale = 0;
  uintptr_t hi = r.size ? r.end() : r.base + 1;
  for (auto it = first_overlap(r.base, hi); it != map_.end() && it->first < hi;) {
    it = map_.erase(it);
    ++stale;
  }
  map_.emplace(r.base, r);
  return stale;
}

std::optional<Region> Registry::erase(uintptr_t base) {
  std::unique_lock lock(mu_);
  auto it = map_.find(base);
  if (it == map_.end()) return std::nullopt;
  Region r = it->second;
  map_.erase(it);
  return r;
}

std::optional<Region> Registry::find(uintptr_t addr) const {
  std::shared_lock lock(mu_);
  auto it = map_.upper_bound(addr);
  if (it == map_.begin()) return std::nullopt;
  --it;
  // A zero-byte region still owns its base address (cuMemHostRegister never makes one, but a
  // zero-size mapping recorded by mistake must not swallow its neighbours).
  if (it->second.contains(addr) || (it->second.size == 0 && it->first == addr)) return it->second;
  return std::nullopt;
}

size_t Registry::count() const {
  std::shared_lock lock(mu_);
  return map_.size();
}

void Registry::clear() {
  std::unique_lock lock(mu_);
  map_.clear();
}

}  // namespace gms
