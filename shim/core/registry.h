#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <mutex>
#include <optional>
#include <shared_mutex>

namespace gms {

// What kind of memory a region is. The first six are the memory kinds that statistics report.
#define GMS_MEM_KINDS(X)                                                              \
  X(device, "device", "cuMemAlloc family: ordinary device memory")                   \
  X(managed, "managed", "cuMemAllocManaged: unified memory")                         \
  X(pinned_host, "pinned_host", "cuMemHostAlloc / cuMemAllocHost: page-locked host")  \
  X(registered_host, "registered_host", "cuMemHostRegister of the program's memory")  \
  X(vmm, "vmm", "cuMemMap of a cuMemCreate handle (virtual memory management)")      \
  X(host_block, "host_block", "malloc family or mmap block at or above the threshold")             \
  X(shim_registered, "shim_registered", "host blocks the shim registered for fast copies")

enum class MemKind : uint8_t {
#define GMS_X(id, name, doc) id,
  GMS_MEM_KINDS(GMS_X)
#undef GMS_X
};
constexpr int kMemKindCount = 0
#define GMS_X(id, name, doc) +1
    GMS_MEM_KINDS(GMS_X)
#undef GMS_X
    ;
const char* mem_kind_name(MemKind k);

// Which call made a region.
enum class Origin : uint8_t {
  cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemAllocAsync, cuMemAllocFromPoolAsync,
  cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister, cuMemMap, cuGraphAddMemAllocNode,
  malloc, calloc, realloc, memalign, mmap_anon, mmap_file, mremap,
};
const char* origin_name(Origin o);

// What the shim made of a device allocation: what the program asked for (device), or memory of
// another kind standing in for it. passthrough: not a device allocation the shim decides on.
enum class Placement : uint8_t { passthrough, device, managed, pinned, swap };
const char* placement_name(Placement p);

struct Region {
  uintptr_t base = 0;
  size_t size = 0;
  MemKind kind = MemKind::device;
  Origin origin = Origin::cuMemAlloc;
  Placement placement = Placement::passthrough;
  int device = -1;  // -1: host memory, or not known
  uint32_t flags = 0;  // the flags of the call that made it (cuMemHostAlloc flags, mmap prot...)
  uintptr_t host_alias = 0;  // placement pinned: the host pointer that cuMemFreeHost needs
  uint64_t serial = 0;       // host blocks: never reused, so a new block at a freed one's address differs
  uintptr_t end() const { return base + size; }
  bool contains(uintptr_t a) const { return a >= base && a < base + size; }
};

// A thread-safe interval map of non-overlapping live regions, keyed by base address. Lookups by
// any address inside a region are O(log n). Regions that overlap a new one are stale (their free
// was never seen, e.g. memory released by a path the shim does not hook) and are replaced; the
// number replaced is returned so callers can count it.
//
// Callers must hold a ShimScope while calling into it: its nodes come from malloc, and the malloc
// hook must not re-enter the registry on the same thread.
class Registry {
 public:
  size_t insert(const Region& r);
  std::optional<Region> erase(uintptr_t base);  // the region starting exactly at base
  std::optional<Region> find(uintptr_t addr) const;  // the region containing addr
  // Removes [lo, hi) from every region it overlaps, trimming or splitting them (munmap of part of
  // a mapping). Calls on_removed(region_part) for each removed piece. Returns bytes removed.
  template <typename F>
  size_t erase_range(uintptr_t lo, uintptr_t hi, F&& on_removed);
  size_t erase_range(uintptr_t lo, uintptr_t hi) {
    return erase_range(lo, hi, [](const Region&) {});
  }
  size_t count() const;
  template <typename F>
  void for_each(F&& f) const {
    std::shared_lock lock(mu_);
    for (const auto& [base, r] : map_) f(r);
  }
  void clear();

  // Held across fork() so the child never inherits a lock taken by a thread that does not exist
  // there. The child gets a fresh lock rather than an unlock: glibc's rwlock remembers the
  // writer's thread id, which is not the child's.
  void lock_for_fork() { mu_.lock(); }
  void unlock_in_parent() { mu_.unlock(); }
  void reinit_in_child() { new (&mu_) std::shared_mutex(); }

 private:
  // Caller holds mu_ exclusively.
  std::map<uintptr_t, Region>::iterator first_overlap(uintptr_t lo, uintptr_t hi);

  mutable std::shared_mutex mu_;
  std::map<uintptr_t, Region> map_;
};

template <typename F>
size_t Registry::erase_range(uintptr_t lo, uintptr_t hi, F&& on_removed) {
  if (hi <= lo) return 0;
  std::unique_lock lock(mu_);
  size_t removed = 0;
  for (auto it = first_overlap(lo, hi); it != map_.end() && it->first < hi;) {
    Region r = it->second;
    it = map_.erase(it);
    uintptr_t cut_lo = r.base > lo ? r.base : lo;
    uintptr_t cut_hi = r.end() < hi ? r.end() : hi;
    Region cut = r;
    cut.base = cut_lo;
    cut.size = cut_hi - cut_lo;
    removed += cut.size;
    on_removed(cut);
    if (r.base < cut_lo) {
      Region left = r;
      left.size = cut_lo - r.base;
      map_.emplace(left.base, left);
    }
    if (r.end() > cut_hi) {
      Region right = r;
      right.base = cut_hi;
      right.size = r.end() - cut_hi;
      it = map_.emplace(right.base, right).first;
      ++it;
    }
  }
  return removed;
}

}  // namespace gms
