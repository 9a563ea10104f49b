#pragma once
// Under auto, an allocation over a quarter of the budget is placed as spill places it (read over
// the link where it does not fit), unless it is made again at the size of one freed before that
// launches used many times: a step's working memory (policy::PlacementRequest::recurring, and
// policy/placement.h for the measurements). This keeps what that takes: each large allocation's
// uses from its making to its free, and the sizes of the latest frees of working memory.
#include <cstdint>

#include "core/registry.h"

namespace gms::act {

// A large allocation (over a quarter of its device's budget) was placed at `base` somewhere other
// than ordinary device memory: its uses are counted from here.
void large_made(uintptr_t base);
// A launch's scan found a pointer into the large allocation at `base` (act/launch_scan.cc).
void large_used(uintptr_t base);
// Work no scan sees was queued (a graph launch: XLA's command buffers): it may use every large
// allocation.
void unscanned_work();
// The allocation `r` is being freed: remembered if it was large and used like working memory.
void large_freed(const Region& r);
// Whether an allocation of `bytes` on `dev` has the size of working memory freed before.
bool made_again(uint64_t bytes, int dev);

}  // namespace gms::act
