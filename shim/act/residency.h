#pragma once
// Prefetch before kernels: finds the managed regions a launch can touch by scanning its arguments,
// asks the residency planner (policy/residency) what to move, and issues the prefetches and
// evictions on the launch's own stream, so they are ordered before the kernel like a hand-written
// cudaMemPrefetchAsync would be.
#include <atomic>
#include <cstdint>

#include "act/tracked.h"
#include "driver/cuda_driver.h"
#include "trace/trace.h"

namespace gms::act {

// Regions the planner may move: managed memory, the shim's spills and what the program allocated
// with cuMemAllocManaged itself (GPUMEMSHIM_PREFETCH=launch); and movable memory (policy swap,
// act/swap.h), whose first `resident` bytes are on the device when it is tracked.
// streamed: managed memory the shim spilled under policy auto for being large (policy/placement.h);
// it comes to the device only into free room (ResidencyPlanner::set_streamed).
// own: managed memory the program made itself (cuMemAllocManaged), which its CPU may touch between
// kernels: the CPU's turns on it are watched (policy/turns.h).
enum class Tracked : uint8_t { managed, swap, streamed, own };
void residency_track(uintptr_t base, uint64_t size, int device, Tracked what = Tracked::managed, uint64_t resident = 0);
// With `only_if`, only when it is true for `base` under the residency lock (a movable chunk that
// holds nothing live: another thread may have placed an allocation there since).
void residency_forget(uintptr_t base, bool (*only_if)(uintptr_t) = nullptr);
// The program advised the managed memory at `p` itself (cuMemAdvise): its own placement wins, so
// the CPU's turns on that region are no longer watched (and a region kept on the host for them is
// the planner's again).
void residency_advised(uintptr_t p);
// Evicts the least recently used tracked memory of `device` until `bytes` more fit in its budget
// (nothing if they never could). For a new movable range, which is cheaper made on the device
// than made on the host and brought in by the next launch.
void residency_make_room(int device, uint64_t bytes);
// A movable allocation was made at `base` (its chunks tracked already), and one was freed (its
// chunks not forgotten yet): with GPUMEMSHIM_SWAP_FORECAST, how each ends is learned and chunks
// that hold only allocations expected to be freed unused are evicted last (policy/lifetime.h).
void residency_swap_made(uintptr_t base, uint64_t size, int device);
void residency_swap_freed(uintptr_t base, uint64_t size, int device);
// Whether none of the tracked region at `base` is on the device (true if not tracked); false too
// when the residency lock is busy (the caller then takes the driver's way, which is always right).
bool residency_on_host(uintptr_t base);

// The inline hooks below test g_tracked_regions (act/tracked.h) first.

// Before a pointer query at `p` (the hooks of cuPointerGetAttribute(s), cuMemGetAddressRange):
// movable memory parked there is mapped first (act/swap.h, unpark). One atomic load, inline, when
// no managed memory is tracked.
void before_pointer_query_slow(uintptr_t p);
inline void before_pointer_query(uintptr_t p) {
  if (__builtin_expect(g_tracked_regions.load(std::memory_order_relaxed) != 0, 0)) before_pointer_query_slow(p);
}

// Called by the launch hooks before the real launch. Costs one atomic load, inline, when no
// managed memory is tracked. Never prefetches into a stream that is being captured.
void before_launch_slow(CUfunction f, void** params, void** extra, CUstream stream, bool per_thread);
inline void before_launch(CUfunction f, void** params, void** extra, CUstream stream, bool per_thread) {
  if (__builtin_expect(g_tracked_regions.load(std::memory_order_relaxed) != 0 || trace::enabled(), 0)) {
    before_launch_slow(f, params, extra, stream, per_thread);
  }
}
// Called by the launch hooks after the real launch: under GPUMEMSHIM_SWAP_ORDER=scan, marks it as
// the last use of the movable memory its scan found (act/swap.h). Keyed on the thread's own state,
// not on g_tracked_regions: another thread may free the last tracked region meanwhile, and a launch
// left open would keep rounds of moves waiting for it.
extern thread_local bool t_launch_open __attribute__((tls_model("initial-exec")));
// And under GPUMEMSHIM_TRACE, writes the launch's `launch` event (its scan's allocations).
extern thread_local bool t_launch_traced __attribute__((tls_model("initial-exec")));
void after_launch_slow(CUstream stream, bool per_thread, bool launched);
inline void after_launch(CUstream stream, bool per_thread, bool launched) {
  if (__builtin_expect(t_launch_open || t_launch_traced, 0)) after_launch_slow(stream, per_thread, launched);
}

// Around a copy or memset whose device ends are `a` and `b` (0: none), in the copy hooks: under
// GPUMEMSHIM_SWAP_ORDER=scan it is planned and marked like a launch that references them, so that
// moves need not wait for the context after it. Copies the hooks cannot name the ends of (2D, 3D,
// batches, arrays, peers) are not: the next round of moves waits for the context.
// Either order, it opens the thread's queue window (act/swap.h, begin_queue) until after the call.
// Returns whether after_transfer_slow must follow; *scanned: it was scanned (scan order).
bool before_transfer_slow(uintptr_t a, uintptr_t b, CUstream stream, bool per_thread, bool* scanned);
void after_transfer_slow(CUstream stream, bool per_thread, bool scanned);
// Around work whose memory no scan sees (the other copies, graph launches): under scan order it
// first waits for the moves' copies still under way and has parked chunks mapped, and no round
// parks a chunk or starts until it is queued (act/swap.h, finish_copies); under context order no
// round starts until it is queued (begin_queue).
bool before_unscanned_slow();
void after_unscanned_slow();
class UnscannedScope {
 public:
  UnscannedScope() {
    if (__builtin_expect(g_tracked_regions.load(std::memory_order_relaxed) != 0, 0)) open_ = before_unscanned_slow();
  }
  ~UnscannedScope() {
    if (open_) after_unscanned_slow();
  }
  UnscannedScope(const UnscannedScope&) = delete;
  UnscannedScope& operator=(const UnscannedScope&) = delete;

 private:
  bool open_ = false;
};
class TransferScope {
 public:
  TransferScope(uintptr_t a, uintptr_t b, CUstream stream, bool per_thread) : stream_(stream), per_thread_(per_thread) {
    if (__builtin_expect(g_tracked_regions.load(std::memory_order_relaxed) != 0, 0)) {
      open_ = before_transfer_slow(a, b, stream, per_thread, &scanned_);
    }
  }
  // After the hook counted the call: see swap::count_scanned_transfer.
  ~TransferScope() {
    if (open_) after_transfer_slow(stream_, per_thread_, scanned_);
  }
  TransferScope(const TransferScope&) = delete;
  TransferScope& operator=(const TransferScope&) = delete;

 private:
  CUstream stream_;
  bool per_thread_;
  bool open_ = false;
  bool scanned_ = false;
};

}  // namespace gms::act
