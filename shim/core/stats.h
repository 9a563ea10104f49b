#pragma once
#include <atomic>
#include <cstdint>

#include "registry.h"

namespace gms {

// Every statistic is declared once here; the text table and the JSON document are both printed by
// walking these lists, so the two can never disagree.
#define GMS_FAMILIES(X)                                                                   \
  X(mem_alloc, "cuMemAlloc, cuMemAllocPitch, cuMemAllocAsync, cuMemAllocFromPoolAsync, cuGraphAddMemAllocNode, cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate") \
  X(mem_alloc_managed, "cuMemAllocManaged")                                              \
  X(mem_free, "cuMemFree, cuMemFreeAsync, cuArrayDestroy, cuMipmappedArrayDestroy")        \
  X(host_alloc, "cuMemHostAlloc, cuMemAllocHost")                                        \
  X(host_free, "cuMemFreeHost")                                                          \
  X(host_register, "cuMemHostRegister")                                                  \
  X(host_unregister, "cuMemHostUnregister")                                              \
  X(mem_get_info, "cuMemGetInfo")                                                        \
  X(vmm, "cuMemCreate, cuMemMap, cuMemUnmap, cuMemRelease")                              \
  X(memcpy, "cuMemcpy family, sync and async")                                           \
  X(memset, "cuMemsetD* family, sync and async")                                         \
  X(prefetch, "cuMemPrefetchAsync")                                                      \
  X(advise, "cuMemAdvise")                                                               \
  X(launch, "cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel, cuGraphLaunch") \
  X(host_block_alloc, "malloc family and mmap, blocks at or above the threshold")        \
  X(host_block_free, "free, munmap, mremap of tracked blocks")

#define GMS_DIRECTIONS(X) \
  X(htod, "host to device") X(dtoh, "device to host") X(dtod, "device to device, same device") \
  X(peer, "device to device, across devices") X(htoh, "host to host")

// The kind of the host side of a copy: what decides whether the copy engine can read it directly.
#define GMS_HOST_KINDS(X) \
  X(pageable, "ordinary host memory: staged by the driver") \
  X(pinned, "page-locked: cuMemHostAlloc or cuMemHostRegister") \
  X(managed, "managed (unified) memory")

// What the placement policy and the residency planner did, in calls and bytes.
#define GMS_DECISIONS(X)                                                                       \
  X(kept_on_device, "device allocations kept on the device by a policy")                      \
  X(spilled_managed, "over-budget device allocations turned into managed memory")             \
  X(spilled_pinned, "over-budget device allocations turned into mapped pinned host memory")   \
  X(spilled_vmm, "over-budget cuMemCreate device handles made in host memory")                \
  X(converted_managed, "allocations turned into managed memory by policy managed")            \
  X(converted_pinned, "allocations turned into pinned host memory by policy pinned")          \
  X(converted_swap, "allocations turned into movable device memory by policy swap")          \
  X(swap_reused, "movable memory allocations served by a range the program had freed")       \
  X(swap_rounds, "rounds of moves of movable memory (bytes: copied out and in)")              \
  X(swap_made_host, "host memory made for movable memory (cuMemCreate)")                      \
  X(swap_made_device, "device memory made for movable memory (cuMemCreate)")                  \
  X(swap_reused_pending, "device memory a copy in took while an earlier round's copy out still read it (ordered on the GPU)") \
  X(swap_sides, "side ranges mapped for the shim's copies of movable memory")                 \
  X(swap_dropped_dead, "device memory of chunks with nothing live given back to the driver")   \
  X(swap_dropped_spare, "spare device memory given back to the driver to stay within the budget") \
  X(swap_kept, "chunks brought in that kept their host copy and the sum of what came in (policy/keep_copies.h)") \
  X(swap_unchanged, "evicted chunks whose host copy was still right in some of their 2 MiB pieces (the same sums as they came in with), and the bytes of those pieces: not copied out") \
  X(swap_dead_pieces, "pieces of evicted chunks that no live allocation covers (freed or never taken): not copied out, bytes") \
  X(swap_rounds_out_only, "rounds of moves with copies out only")                             \
  X(swap_rounds_in_only, "rounds of moves with copies in only")                               \
  X(refused, "allocations refused with out-of-memory by the device or managed limit")         \
  X(swap_filled, "pieces of chunks brought back lazily (GPUMEMSHIM_SWAP_LAZY), copied in when a use first needed them: calls and bytes") \
  X(swap_filled_whole, "of those, pieces copied in because a use no scan narrowed to pieces needed the whole chunk (work no scan sees, the shim's own reads, a launch past the scan's list): calls and bytes") \
  X(swap_in_whole, "chunks a round copied in whole (a kept host copy, brought back ahead, host memory at the managed limit, or lazy chunks off): calls and bytes") \
  X(swap_unfilled, "pieces of chunks brought back lazily that left again before any use needed them: bytes copied neither in nor out") \
  X(prefetched, "managed memory prefetched to the device before a launch")                    \
  X(evicted, "managed memory sent back to the host to stay within the budget")                \
  X(evicted_early, "of those, evicted as soon as their uses were over, before room was needed (GPUMEMSHIM_SWAP_EARLY)") \
  X(early_kept, "early candidates left on the device: the learnt step's next use takes others first") \
  X(early_excess, "early evictions the learnt step's next use later showed it would not have made (their lesson forgotten)") \
  X(left_remote, "regions left on the host: too large for the budget, or ping-ponging")       \
  X(cpu_turns, "launches that found the program's managed memory taken back by the CPU: prefetched again") \
  X(shared_host, "managed regions the CPU and the GPU take turns on, kept on the host for kernels to reach over the link") \
  X(shared_probe, "of those, given back to the device to see whether the CPU's turns go on")  \
  X(copy_registered, "pageable copies made at pinned speed from a block the shim registered")  \
  X(copy_staged, "pageable copies through the shim's pinned staging buffers")                  \
  X(tail_staged, "registered async uploads whose last part went through staging, to return sooner") \
  X(copy_on_host, "copies to or from memory the shim placed on the host, by host threads")     \
  X(memcpy_crew, "large memcpy/memmove calls to or from CUDA pinned memory, split across the copy threads") \
  X(host_alloc_fast, "large pinned host allocations the shim made: pages touched by the copy threads, then registered") \
  X(registered, "host blocks the shim registered (pinned)")                                    \
  X(unregistered, "registrations the shim dropped")                                            \
  X(cache_hit, "copies that found their block registered")                                     \
  X(cache_evicted, "registrations dropped to stay within GPUMEMSHIM_REGISTER_LIMIT")          \
  X(invalidated, "registrations dropped because the memory was freed, unmapped or discarded")  \
  X(pool_reused, "large host allocations served by a recycled pool block (GPUMEMSHIM_HOST_POOL)") \
  X(pool_new, "large host allocations served by a new pool block")                           \
  X(pool_released, "pool blocks given back to the system to stay within the pool's bound")

// Time spent by the shim's own work that the program waits for, in nanoseconds.
#define GMS_TIMINGS(X)                                  \
  X(register_ns, "registering host blocks")             \
  X(unregister_ns, "unregistering host blocks")         \
  X(staged_ns, "staged copies, end to end")            \
  X(launch_scan_ns, "launches and copies while the shim tracks memory (movable or managed): its work before and after each, moves included") \
  X(swap_create_ns, "making movable memory")          \
  X(swap_free_ns, "freeing movable memory")           \
  X(swap_move_ns, "moving movable memory")            \
  X(swap_remap_ns, "of which remapping it")           \
  X(swap_backing_ns, "of which getting memory for it")  \
  X(swap_wait_ns, "waiting for the GPU, movable memory")

#define GMS_LAUNCH_KINDS(X) \
  X(kernel, "cuLaunchKernel") X(kernel_ex, "cuLaunchKernelEx") \
  X(cooperative, "cuLaunchCooperativeKernel") X(graph, "cuGraphLaunch")

// Things that should stay zero; a non-zero value is a lead for a bug report.
#define GMS_ANOMALIES(X)                                                                      \
  X(stale_regions, "regions replaced because their free was never seen")                     \
  X(unknown_frees, "frees of pointers the shim never saw allocated (passed through)")        \
  X(unrouted_entry_points, "driver entry points with a hook whose pointer could not be routed")

#define GMS_ENUM(id, doc) id,
enum class Family : uint8_t { GMS_FAMILIES(GMS_ENUM) };
enum class Direction : uint8_t { GMS_DIRECTIONS(GMS_ENUM) };
enum class HostKind : uint8_t { GMS_HOST_KINDS(GMS_ENUM) };
enum class LaunchKind : uint8_t { GMS_LAUNCH_KINDS(GMS_ENUM) };
enum class Anomaly : uint8_t { GMS_ANOMALIES(GMS_ENUM) };
enum class Decision : uint8_t { GMS_DECISIONS(GMS_ENUM) };
enum class Timing : uint8_t { GMS_TIMINGS(GMS_ENUM) };
#undef GMS_ENUM
#define GMS_COUNT(id, doc) +1
constexpr int kFamilyCount = 0 GMS_FAMILIES(GMS_COUNT);
constexpr int kDirectionCount = 0 GMS_DIRECTIONS(GMS_COUNT);
constexpr int kHostKindCount = 0 GMS_HOST_KINDS(GMS_COUNT);
constexpr int kLaunchKindCount = 0 GMS_LAUNCH_KINDS(GMS_COUNT);
constexpr int kAnomalyCount = 0 GMS_ANOMALIES(GMS_COUNT);
constexpr int kDecisionCount = 0 GMS_DECISIONS(GMS_COUNT);
constexpr int kTimingCount = 0 GMS_TIMINGS(GMS_COUNT);
#undef GMS_COUNT

struct CallCounter {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> errors{0};  // calls that returned an error
};

// A counter as read: plain numbers.
struct Tally {
  uint64_t calls = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
};

// Relaxed atomics throughout: these are tallies read once at exit, not synchronisation.
class Stats {
 public:
  void call(Family f, uint64_t bytes, bool ok) {
    auto& c = family_[static_cast<int>(f)];
    c.calls.fetch_add(1, std::memory_order_relaxed);
    if (!ok) {
      c.errors.fetch_add(1, std::memory_order_relaxed);
    } else if (bytes != 0) {
      c.bytes.fetch_add(bytes, std::memory_order_relaxed);
    }
  }
  void copy(Direction d, uint64_t bytes) { add(direction_[static_cast<int>(d)], bytes); }
  void copy_host(HostKind k, uint64_t bytes) { add(host_kind_[static_cast<int>(k)], bytes); }
  void decision(Decision d, uint64_t bytes) { add(decision_[static_cast<int>(d)], bytes); }
  void decisions(Decision d, uint64_t calls, uint64_t bytes) {
    if (calls == 0) return;
    decision_[static_cast<int>(d)].calls.fetch_add(calls, std::memory_order_relaxed);
    decision_[static_cast<int>(d)].bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  // One atomic per launch, the hottest hook: the launch family's call count is derived when read
  // (successful launches by kind, plus failures).
  void launch(LaunchKind k, bool ok) {
    if (ok) {
      launches_[static_cast<int>(k)].fetch_add(1, std::memory_order_relaxed);
    } else {
      family_[static_cast<int>(Family::launch)].errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  void time(Timing t, uint64_t ns) { timings_[static_cast<int>(t)].fetch_add(ns, std::memory_order_relaxed); }
  uint64_t timing(Timing t) const { return timings_[static_cast<int>(t)].load(std::memory_order_relaxed); }
  void anomaly(Anomaly a, uint64_t n = 1) { anomalies_[static_cast<int>(a)].fetch_add(n, std::memory_order_relaxed); }
  void live_add(MemKind k, uint64_t bytes);
  void live_sub(MemKind k, uint64_t bytes);

  Tally family(Family f) const;
  Tally direction(Direction d) const { return read(direction_[static_cast<int>(d)]); }
  Tally host_kind(HostKind k) const { return read(host_kind_[static_cast<int>(k)]); }
  Tally decision(Decision d) const { return read(decision_[static_cast<int>(d)]); }
  uint64_t launches(LaunchKind k) const { return launches_[static_cast<int>(k)].load(std::memory_order_relaxed); }
  uint64_t anomalies(Anomaly a) const { return anomalies_[static_cast<int>(a)].load(std::memory_order_relaxed); }
  uint64_t live(MemKind k) const { return live_[static_cast<int>(k)].load(std::memory_order_relaxed); }
  uint64_t peak(MemKind k) const { return peak_[static_cast<int>(k)].load(std::memory_order_relaxed); }

  void reset();  // in a fork child: it reports only what it does itself

  // Both printers write with write(2) from fixed buffers: they run from a destructor at exit.
  void print_text(int fd) const;
  int print_json(int fd, long pid) const;  // 0 or the errno of the first failed write

 private:
  static Tally read(const CallCounter& c) {
    return {c.calls.load(std::memory_order_relaxed), c.bytes.load(std::memory_order_relaxed),
            c.errors.load(std::memory_order_relaxed)};
  }
  static void add(CallCounter& c, uint64_t bytes) {
    c.calls.fetch_add(1, std::memory_order_relaxed);
    c.bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  CallCounter family_[kFamilyCount];
  CallCounter direction_[kDirectionCount];
  CallCounter host_kind_[kHostKindCount];
  CallCounter decision_[kDecisionCount];
  std::atomic<uint64_t> launches_[kLaunchKindCount] = {};
  std::atomic<uint64_t> anomalies_[kAnomalyCount] = {};
  std::atomic<uint64_t> timings_[kTimingCount] = {};
  std::atomic<uint64_t> live_[kMemKindCount] = {};
  std::atomic<uint64_t> peak_[kMemKindCount] = {};
};

}  // namespace gms
