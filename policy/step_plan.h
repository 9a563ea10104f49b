#pragma once
// The schedule of a repeating step under a device budget: which bytes leave the device and when,
// when each comes back, what is dropped with no copy, and the step time this allows on a link whose
// two directions move bytes at their own rates while kernels run.
//
// How (docs/design/schedule.md): the step is unrolled a few times (its lives and uses repeat) and
// each allocation cut into pieces (the unit of moves, like the shim's chunks). Walking the kernels
// in order, a kernel's pieces must be on the device, and room is made by evicting other pieces; a
// piece freed before its next use is dropped without a copy. Which pieces (Victims): most_slack
// takes pieces used again at or after the end of the memory pressure around the kernel (the first
// kernel from it whose live bytes fit the budget: such a piece is not needed back while others must
// still be away), and among them the least late: its copy out over before the kernel that needs
// the room, behind the copies out decided before it, and its copy in over before its next use,
// behind the copies in those evictions already owe by then (kernel time as the clock; lateness
// below zero counts, time to spare does not), ties to the one used again farthest ahead; with none
// such (as when the pressure never ends), the piece used again farthest ahead. farthest_next_use is
// Belady's rule alone, which moves the fewest bytes; least_recently_used the rule of caches. Each
// wins on some recorded step, so the default plans with all three and keeps the fastest. The timing
// then places every move as early as it can go: a copy out starts as soon as the last use before it
// has run and the link is free, its room frees when it is done, and a copy in starts as soon as the
// link is free and room is there, in the order the kernels need them. A kernel starts when the one
// before it has ended and its pieces are in. The last step but one is measured: the steady state,
// with the uses of the step after it known.
//
// This step time is what an executor that knows the step in advance and waits for nothing else can
// reach with these moves: `gpumemshim report` calls it the schedule. The floor under every schedule
// is policy/step_floor.h.
//
// Pure code: no CUDA, no globals, no I/O.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "policy/timeline.h"

namespace gms::policy {

struct StepPlanConfig {
  uint64_t budget = 0;                 // bytes of the step's allocations the device may hold
  uint64_t piece_bytes = 64ull << 20;  // the unit of moves (allocations are cut into such pieces)
  double out_bytes_per_ns = 54.6;      // device to host (bytes per ns = GB/s)
  double in_bytes_per_ns = 54.6;       // host to device
  // fastest: the shortest step of the three others (ties: the fewest bytes moved); most_slack (see
  // the top of this file); farthest_next_use (Belady's rule alone); least_recently_used.
  enum class Victims : uint8_t { fastest, most_slack, farthest_next_use, least_recently_used };
  Victims victims = Victims::fastest;
  uint32_t steps = 3;  // steps unrolled before the measured one ends (at least 2); one more follows it
  // Pieces freed before their next use are copied out when evicted (once used since they were
  // made), as a shim must that is not told the program will not read them again: the least time
  // for an executor that never loses data. Off: they are dropped with no copy.
  bool copy_dead = false;
};

// One move of the measured step, at kernel positions of that step (0..P-1).
struct StepMove {
  uint32_t alloc = 0;
  uint32_t piece = 0;    // index of the piece within the allocation
  uint64_t bytes = 0;
  bool to_device = false;
  bool copied = true;    // false: evicted with no copy (freed before its next use)
  int64_t needed_at = 0; // the kernel that made room (out) or uses it (in)
  int64_t after = -1;    // out: the last kernel that used it before (its copy waits for it); -1: none this step
  int64_t start_ns = 0, end_ns = 0;  // from the measured step's start (a copy out may start in the step before)
};

struct StepPlan {
  bool feasible = true;    // false: some kernel alone needs more than the budget (it then exceeds it)
  uint64_t step_ns = 0;    // the measured step, from the end of the step before to its own end
  uint64_t kernel_ns = 0;  // its kernels alone
  uint64_t bytes_in = 0, bytes_out = 0, bytes_dropped = 0;
  uint64_t max_resident = 0;  // over the whole unrolled run, at any kernel
  std::vector<StepMove> moves;              // in the order they were decided
  std::vector<int64_t> kernel_start_ns;     // measured step, from its start
  // (alloc, piece) of the pieces on the device when the measured step starts.
  std::vector<std::pair<uint32_t, uint32_t>> resident_at_start;
};

StepPlan plan_step(const StepTimeline& t, const StepPlanConfig& cfg);

// Replays `plan`'s moves over the measured step and says what is wrong with them (an empty string
// when nothing is): a kernel whose pieces are not all on the device, more resident than the budget,
// a piece brought back that was not away, a copy out that starts before the use it must follow, a
// copy in that ends after its kernel starts.
std::string check_plan(const StepTimeline& t, const StepPlanConfig& cfg, const StepPlan& plan);

}  // namespace gms::policy
