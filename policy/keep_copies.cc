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
  } else if (unchanged_ * 4 < in_) {
    paused_ = kPauseWindows;
  }
  in_ = 0;
  unchanged_ = 0;
  return keep;
}

}  // namespace gms::policy
