#pragma once
// Prefetch before kernels: finds the managed regions a launch can touch by scanning its arguments,
// asks the residency planner (policy/residency) what to move, and issues the prefetches and
// evictions on the launch's own stream, so they are ordered before the kernel like a hand-written
// cudaMemPrefetchAsync would be.
#include <atomic>
#include <cstdint>

#include "driver/cuda_driver.h"

namespace gms::act {

// Regions the planner may move: managed memory, the shim's spills and what the program allocated
// with cuMemAllocManaged itself (GPUMEMSHIM_PREFETCH=launch); and movable memory (policy swap,
// act/swap.h), whose first `resident` bytes are on the device when it is tracked.
enum class Tracked : uint8_t { managed, swap };
void residency_track(uintptr_t base, uint64_t size, int device, Tracked what = Tracked::managed, uint64_t resident = 0);
void residency_forget(uintptr_t base);
// Evicts the least recently used tracked memory of `device` until `bytes` more fit in its budget
// (nothing if they never could). For a new movable range, which is cheaper made on the device
// than made on the host and brought in by the next launch.
void residency_make_room(int device, uint64_t bytes);
// Bytes of the tracked region at `base` the planner has moved to the device (0 if not tracked).
uint64_t residency_resident_bytes(uintptr_t base);

// Called by the launch hooks before the real launch. Costs one atomic load, inline, when no
// managed memory is tracked. Never prefetches into a stream that is being captured.
extern std::atomic<uint64_t> g_tracked_regions;
void before_launch_slow(CUfunction f, void** params, void** extra, CUstream stream, bool per_thread);
inline void before_launch(CUfunction f, void** params, void** extra, CUstream stream, bool per_thread) {
  if (__builtin_expect(g_tracked_regions.load(std::memory_order_relaxed) != 0, 0)) {
    before_launch_slow(f, params, extra, stream, per_thread);
  }
}

}  // namespace gms::act
