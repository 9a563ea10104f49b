#pragma once
// Scan-order bookkeeping of movable memory (GPUMEMSHIM_SWAP_ORDER=scan): what a round of moves
// must wait for instead of the whole context. The marks of each chunk live with it (slabs.h,
// RangeMarks); here: the queue windows of other threads' work, the work no scan sees, and the
// parked chunks mapped again before a use.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "slabs.h"

namespace gms::act::swap {

// The state of this part. Caller holds mu().
struct Scan {
  int unscanned_open = 0;     // work no scan sees, between finish_copies and end_unscanned
  uint64_t unscanned_seen = 0;  // unscanned_work() at the last round (kUnmarked: wait next time)
  int queueing = 0;           // windows between begin_queue and end_queue, all threads
  // Signalled when another thread's work is queued: queueing drops.
  std::condition_variable queued;
  bool queueing_stuck_said = false;
};
Scan& scan();
constexpr uint64_t kUnmarked = ~uint64_t{0};

// Copies, memsets, graph launches and launches over a quiet device (act/quiet.h) so far whose
// memory no scan saw.
uint64_t unscanned_work();
// Waits until no launch the scan saw can still use `ranges`, or for the whole context when work
// the scan cannot see was queued since the last round. The shim's own copies of them are not
// waited for here: they reach the memory through side ranges, so they do not mind a remap of the
// program's range, and the copies that need them done wait for them on the GPU.
CUresult wait_for_uses(const std::vector<Range*>& ranges);
// Before a round of moves: waits (on mu(), via `lock`) while another thread is queueing work that
// the round's synchronisation (context order) or its wait for the uses (scan order) would not
// cover yet (act/swap.h, begin_queue). Past a minute, a window was never closed (a bug), and the
// round goes ahead rather than hang the program.
void wait_for_queueing(std::unique_lock<std::mutex>& lock);
// Maps the host memory of the parked chunks among `bases` back at their place in the program's
// slab, in runs of neighbours (one access call each: the driver charges per call). A chunk that
// cannot be mapped stays parked: a kernel that reaches it faults.
void map_parked(std::vector<uintptr_t>& bases);

}  // namespace gms::act::swap
