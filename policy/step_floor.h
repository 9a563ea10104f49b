#pragma once
// The floor under a repeating step's time past a budget: no schedule of moves, whichever bytes it
// keeps away, runs the step faster on this link (docs/design/schedule.md, "The floor").
//
// The model is the schedule's (policy/step_plan.h): kernels one after another at their recorded
// durations, at each kernel its allocations on the device and at most `budget` bytes there, each
// direction of the link moving at its own rate, copies overlapping kernels and each other.
//
// Pure code: no CUDA, no globals, no I/O.
#include <cstdint>

#include "policy/step_plan.h"
#include "policy/timeline.h"

namespace gms::policy {

// At a kernel p, `need` bytes alive beyond the budget (and not in use by p) are away; each crossed
// the out direction after its last use and crosses the in direction before its next use, or never
// when it is freed first (with copy_dead, dead bytes used since they were made cross out only).
// Taking the bytes last used earliest minimises the time the copies out need before p, and those
// used again latest (or never) the time the copies in need after it, whichever the schedule really
// keeps away; the two windows, cut at any kernel c before p and c + P after it, lie in one step, so
// the step is at least their sum. The floor is the largest such sum over every p and every cut c,
// and at least the bytes one direction must move in a step at its rate.
uint64_t lower_bound_ns(const StepTimeline& t, const StepPlanConfig& cfg);

// The floor and where it binds, for a report to say why.
struct StepFloor {
  uint64_t ns = 0;
  // The kernel where the budget binds hardest (-1: the floor is the kernels alone, or one
  // direction's bytes), the bytes away there, and the cut that binds: from the start of kernel
  // `cut` (of this step, or of the step before when negative) to the start of `at` at least
  // `out_ns` (the kernels between and the copies out of what is away at `at`), and from there to
  // kernel cut + P at least `in_ns` (the copies in and the kernels after them); their sum is `ns`.
  int64_t at = -1, cut = 0;
  uint64_t away = 0;
  uint64_t out_ns = 0, in_ns = 0;
};
StepFloor step_floor(const StepTimeline& t, const StepPlanConfig& cfg);

}  // namespace gms::policy
