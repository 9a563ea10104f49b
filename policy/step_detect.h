#pragma once
// Finds the step of a loop in the sequence of what it launches: the period P for which the sequence
// repeats itself over the longest stretch at its end, or ending at most a quarter of the sequence
// before it (what a program does after its loop: an evaluation, a collective, saving its weights).
// A loop's last steps repeat exactly (the same kernels in the same order); a short pattern inside a
// step (a layer repeated, an optimizer's per-tensor kernels) repeats too, but only over a stretch
// shorter than the whole run of steps.
//
// Pure code: no CUDA, no globals, no I/O.
#include <cstdint>
#include <vector>

namespace gms::policy {

struct Period {
  uint64_t period = 0;   // 0: none found
  uint64_t matched = 0;  // how many keys before the tail equal the key `period` before them
  uint64_t tail = 0;     // keys at the end after the matched stretch
};

// Among periods from `min_period` to half the sequence, the one matched over the longest stretch
// (the shortest tail, then the shortest period, among equals). `period` 0 when nothing repeats at
// least once over a whole period.
Period find_period(const std::vector<uint32_t>& keys, uint64_t min_period = 8);

}  // namespace gms::policy
