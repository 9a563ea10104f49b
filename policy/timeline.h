#pragma once
// One step of a training (or inference) loop as the schedule planner sees it: the kernels in their
// order with their durations, the allocations each one uses, and when each allocation is made and
// freed. The step repeats: the timeline is cyclic (docs/design/schedule.md).
//
// Positions are kernel indices 0..P-1. An allocation is either persistent (made before the loop,
// alive throughout: `born` == kPersistent) or made at position `born` of every step (before kernel
// `born` runs) and freed at `died` (before kernel `died` runs), with born < died <= born + P: a
// `died` past P means it is freed at died - P of the next step (PyTorch's gradients, freed by
// zero_grad in the next forward pass). A kernel at position p that uses such an allocation uses the
// instance alive at p: this step's when born <= p < died, else the previous step's (p < died - P).
//
// Text form (one record per line, `#` comments):
//   timeline 1 <P>
//   alloc <id> <bytes> <born|persistent> [<died>]
//   kernel <pos> <fn> <dur_ns> [<alloc id>...]
// ids are 0..n-1 in order; every position has one kernel line, in order; <fn> numbers the kernel's
// function (the same function, the same number: a layer's kernels repeat within a step).
//
// Pure data: no CUDA, no globals, no I/O beyond strings.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gms::policy {

struct StepTimeline {
  static constexpr int64_t kPersistent = -1;
  struct Alloc {
    uint64_t bytes = 0;
    int64_t born = kPersistent;
    int64_t died = 0;  // unused when persistent
    bool persistent() const { return born == kPersistent; }
  };
  struct Kernel {
    uint32_t fn = 0;
    uint64_t dur_ns = 0;
    std::vector<uint32_t> uses;  // allocation ids, each once
  };
  std::vector<Alloc> allocs;
  std::vector<Kernel> kernels;

  uint64_t period() const { return kernels.size(); }
  // Whether allocation `a`'s instance is alive at position p (0 <= p < P).
  bool alive(uint32_t a, uint64_t p) const;
  // Bytes alive at position p.
  uint64_t live_bytes(uint64_t p) const;
  // The largest live_bytes over the step.
  uint64_t peak_bytes() const;
  uint64_t kernel_ns() const;

  // Why the timeline is not one (an empty string when it is): ids out of range, a use of an
  // allocation not alive at the kernel, a life longer than a step.
  std::string check() const;
  std::string format() const;
  // Parses the text form; on failure returns false and says why (with the line number).
  static bool parse(std::string_view text, StepTimeline* out, std::string* error);
};

}  // namespace gms::policy
