#pragma once
// The page census of the program's own managed memory, for the trace (GPUMEMSHIM_TRACE): which of
// its pages went to the GPU and came back to the CPU, counted from the CPU's page table at moments
// when nothing moves them (policy/page_census.h says why CUPTI's records are not enough and what a
// look cannot see), written as the trace's `pages` lines (shim/trace/FORMAT.md).
//
// Regions of 4 MiB to 16 GiB (others are left to CUPTI's records). Looks: before a launch (at
// a region's first, and the first after a synchronisation: the CPU touches managed memory kernels
// may use only once it has synchronised; every launch counts as using every region), at each
// synchronisation (cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize, and synchronous
// copies, which wait for the work before them) for the regions
// kernels used since, before a region is freed, and at exit. Each look reads the region's whole
// page table (8 bytes a page); the census stops, and says so, once its looks have taken more than
// 2% of the run. Where the page table does not follow managed memory (act/cpu_pages.h) it is off,
// and says so. Everything here is a no-op unless the trace is on.
#include <atomic>
#include <cstdint>

namespace gms::act {

// The program made managed memory on `device` (after the real call).
void census_made(uintptr_t base, uint64_t bytes, int device);
// The program's region at `base` is about to be freed.
void census_freeing(uintptr_t base);

// The hooks below cost one relaxed load unless the census has regions.
extern std::atomic<bool> g_census_on;
// A kernel or graph launch, before the real one (and before the shim's prefetches for it).
void census_launch_slow();
inline void census_launch() {
  if (__builtin_expect(g_census_on.load(std::memory_order_relaxed), 0)) census_launch_slow();
}
// The launch was queued: every region may be in its kernels' use from here.
void census_launched_slow();
inline void census_launched(bool ok) {
  if (__builtin_expect(g_census_on.load(std::memory_order_relaxed), 0) && ok) census_launched_slow();
}
// The program synchronised with the device (the hook's real call succeeded).
void census_synchronized_slow();
inline void census_synchronized() {
  if (__builtin_expect(g_census_on.load(std::memory_order_relaxed), 0)) census_synchronized_slow();
}

}  // namespace gms::act
