#include "keep_copies.h"

namespace gms::policy {

bool KeepCopies::keep_next() {
  const bool keep = paused_ == 0;
  if (++in_ < kWindow) return keep;
  // The window is over: a verdict while keeping (a quarter of the copies in left unchanged, the
  // evictions lagging by up to a window, as in decoding's cycle over the layers), a step of the
  // pause otherwise.
  if (paused_ > 0) {
    --paused_;
  } else if (unchanged_ * 4 < uint64_t{in_} * kScale) {
    paused_ = kPauseWindows;
  }
  in_ = 0;
  unchanged_ = 0;
  return keep;
}

void KeepCopies::left_unchanged(uint32_t same, uint32_t pieces) {
  if (pieces != 0) unchanged_ += uint64_t{same} * kScale / pieces;
}

}  // namespace gms::policy
