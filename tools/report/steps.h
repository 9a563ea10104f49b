#pragma once
// The repeating step of a traced process and the least step time its budget allows
// (policy/step_plan.h): found from the `launch` lines (which allocations each kernel uses), CUPTI's
// `kernel` records (their durations) and the `alloc` and `free` lines (each allocation's life).
#include <cstdint>
#include <string>

#include "policy/timeline.h"
#include "report/trace.h"

namespace gms::report {

struct StepRow {
  size_t file = 0;
  std::string missing;       // why there is no step (empty when there is one)
  uint64_t period = 0;       // kernels per step
  uint64_t steps = 0;        // whole steps the trace holds
  uint64_t first = 0;        // the modelled step's first launch (seq order)
  int64_t measured_ns = 0;   // that step as it ran: from the end of the kernel before it to its last kernel's end
  int64_t kernel_ns = 0;     // its kernels, each at its fastest over the trace's steps
  uint64_t peak_bytes = 0;   // live at its peak
  uint64_t budget = 0;       // the device's budget in the header (0: none)
  bool feasible = true;
  int64_t bound_ns = 0;      // the schedule's step time at the budget (0: no budget, or nothing moves)
  int64_t floor_ns = 0;      // no schedule does better
  // Where the floor binds (policy/step_floor.h): the kernel (position in the step, -1: none, and
  // its name), the bytes away there, the least time before it and after it within one step.
  int64_t floor_at = -1;
  std::string floor_kernel;
  uint64_t floor_away = 0;
  int64_t floor_out_ns = 0, floor_in_ns = 0;
  uint64_t plan_in = 0, plan_out = 0;  // bytes the schedule moves per step
  uint64_t plan_dropped = 0;           // bytes it evicts with no copy: freed before their next use
  // The same with every eviction of memory used since it was made copied out (StepPlanConfig::
  // copy_dead): what a shim that is not told memory is dead, and never loses data, can reach.
  int64_t bound_copied_ns = 0, floor_copied_ns = 0;
  uint64_t plan_copied_out = 0;
  // How the measured step spent its time: kernels running, the GPU idle, the shim's copies each way.
  int64_t busy_ns = 0, idle_ns = 0;
  int64_t idle_copying_ns = 0;  // of idle_ns, with a copy each way or both running: copies no kernel overlaps
  uint64_t copied_in = 0, copied_out = 0;
  int64_t copy_in_ns = 0, copy_out_ns = 0;
  int64_t copy_both_ns = 0;  // copies in and copies out running at once (the link's two directions)
};

// The step of one file (its last whole step but one: the lives of the step after it are known).
// Fills `timeline` when there is one.
// `budget` (0: the header's) is the device budget the floor and the schedule are computed for.
StepRow find_step(const TraceSet& set, size_t file, policy::StepTimeline* timeline, uint64_t budget = 0);

}  // namespace gms::report
