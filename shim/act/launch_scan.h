#pragma once
// The launch scan: every aligned word of a launch's argument bytes (or of a copy's ends) taken as a
// pointer, for the tracked memory it points into (act/residency.cc, its only user, calls it under
// the residency lock). Besides the regions, what it finds is kept per thread for the residency
// code after it: the pieces of movable chunks for the marks, the allocations for the trace's
// `launch` event and the step learner.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "act/piece_uses.h"
#include "policy/residency.h"

namespace gms::act {

// A launch's argument words, kept for the pointer tables (act/tables.h) under scan order: all of
// them, and those that point into movable memory.
struct Words {
  std::vector<uintptr_t> all;
  std::vector<uintptr_t> movable;
  // The program's own managed memory among them: a kernel may find addresses there that the CPU
  // wrote, which no hook sees (a linked structure in managed memory).
  bool program_managed = false;
};

// Whether the region at `base` (managed memory, or a movable chunk) is tracked on `dev`: the
// residency planner's table, which only act/residency.cc reads.
using TrackedOn = bool (*)(uintptr_t base, int dev);

// Adds to `out` the tracked regions of this device that `w` points into, if any. [lo, hi): the span
// of tracked memory (act/tracked.h).
void scan_word(uintptr_t w, uintptr_t lo, uintptr_t hi, int dev, TrackedOn tracked, std::vector<policy::RegionId>& out,
               Words* words = nullptr);

// Every 8-byte aligned word of the argument bytes: taken as a pointer, and when it is the handle of
// a texture object of this device, also for the memory the texture reads. (A number that happens
// to equal a handle costs a needless move at worst.)
void scan_bytes(const unsigned char* p, size_t n, uintptr_t lo, uintptr_t hi, int dev, TrackedOn tracked,
                std::vector<policy::RegionId>& out, Words* words = nullptr);

// The pieces of each movable chunk the calling thread's scan found used (act/piece_uses.h).
extern thread_local swap::PieceUses t_pieces __attribute__((tls_model("initial-exec")));

// GPUMEMSHIM_TRACE: the allocations the calling thread's launch points into, from its scan to the
// `launch` event written after the launch is queued (the correlation id exists only then).
struct LaunchTrace {
  static constexpr size_t kMax = 256;
  uintptr_t regions[kMax];
  uint32_t n;
  uintptr_t stream;
  uintptr_t fn;
  bool collecting;
};
extern thread_local LaunchTrace t_trace __attribute__((tls_model("initial-exec")));

}  // namespace gms::act
