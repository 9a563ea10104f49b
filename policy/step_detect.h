#pragma once
// Finds the step of a loop in the sequence of what it launches: the period P for which the sequence
// repeats itself over the longest stretch at its end. A loop's last steps repeat exactly (the same
// kernels in the same order); a short pattern inside a step (a layer repeated, an optimizer's
// per-tensor kernels) repeats too, but only over a stretch shorter than the whole run of steps.
//
// Pure code: no CUDA, no globals, no I/O.
#include <cstdint>
#include <vector>

namespace gms::policy {

struct Period {
  uint64_t period = 0;   // 0: none found
  uint64_t matched = 0;  // how many keys at the end equal the key `period` before them
};

// Among periods from `min_period` to half the sequence, the one matched over the longest stretch at
// the end (the shortest among equals). `period` 0 when nothing repeats at least once over a whole
// period.
Period find_period(const std::vector<uint32_t>& keys, uint64_t min_period = 8);

}  // namespace gms::policy
