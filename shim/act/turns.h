#pragma once
// The CPU's turns on the program's own managed memory, watched for the residency planner
// (act/residency.cc, its only user, calls everything here under its lock): which regions are
// watched, when their pages were last looked at, the event after each one's latest prefetch, and
// what policy/turns.h decides, carried out (the advice, the move to the host) with the real driver.
// Why and what was measured: docs/design/policies.md, "Managed memory the CPU and the GPU take
// turns on".
#include <cstdint>
#include <unordered_map>

#include "driver/cuda_driver.h"
#include "policy/turns.h"

namespace gms::act {

class TurnWatch {
 public:
  // What the planner must do about a region after a launch's look at it.
  enum class Planner : uint8_t { nothing, on_host, shared, unshared };

  // A region of the program's own managed memory (ignored when too small to matter).
  void track(uintptr_t base, uint64_t size);
  void forget(uintptr_t base);
  bool empty() const { return regions_.empty(); }

  // A launch on `stream` uses `base`, of which the planner has `resident` bytes on device `dev`;
  // `launch` numbers the launch (a region used twice in one launch is looked at once). Samples its
  // pages when it may, asks the tracker, carries out its decision (advice, a move to the host)
  // and says what the planner must do.
  Planner before_launch(uintptr_t base, uint64_t resident, uint64_t launch, int dev, CUstream stream, bool per_thread);
  // The planner queued a prefetch of `base` on `stream`: pages are looked at only once it has run.
  void prefetched(uintptr_t base, CUstream stream, bool per_thread);
  // The program advised the region itself: no longer watched. True if it was.
  bool advised(uintptr_t base);

 private:
  struct Region {
    uint64_t size = 0;
    uint64_t sampled_ns = 0;      // when its pages were last looked at
    uint64_t seen = UINT64_MAX;   // the launch that last looked at it
    CUevent prefetched = nullptr;  // recorded after the planner's latest prefetch of it
  };
  void drop(uintptr_t base);

  policy::TurnTracker tracker_;
  std::unordered_map<uintptr_t, Region> regions_;
};

}  // namespace gms::act
