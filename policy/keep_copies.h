#pragma once
// Whether chunks of movable memory coming in keep their host copy (shim/act/swap/sums.h): a kept
// copy saves the copy out of a chunk that leaves as it came in (weights that decoding's steps only
// read: most of its evictions, docs/benchmarks.md), and costs a sum on the GPU at every copy
// in, a check at the eviction and host memory that cannot serve other evictions meanwhile. Where
// chunks do not leave unchanged (training: activations written, brought back once and freed;
// weights the optimizer writes) the cost is all there is (docs/design/schedule.md). So copies are
// kept while they pay: over each window of copies in, at least a quarter of those kept must leave
// unchanged (counted by the share of their pieces that did, act/swap/sums.h); otherwise none is kept for a pause of several windows, and then they are tried again
// (the program may have moved on, from training to evaluation or generation). Pure code.
#include <cstdint>

namespace gms::policy {

class KeepCopies {
 public:
  static constexpr uint32_t kWindow = 256;     // copies in a verdict is made over
  static constexpr uint32_t kPauseWindows = 8;  // windows without keeping after a verdict against

  // Whether the chunk coming in now keeps its copy; counts the copy in.
  bool keep_next();
  // A kept copy turned out right, when its chunk left, in `same` of its `pieces` pieces: those
  // are not copied out. A chunk counts for the share of its pieces that stayed the same.
  void left_unchanged(uint32_t same = 1, uint32_t pieces = 1);
  bool keeping() const { return paused_ == 0; }

 private:
  uint32_t in_ = 0;         // copies in in this window
  uint64_t unchanged_ = 0;  // evictions that found their kept copy right, in this window, in kScale
  static constexpr uint64_t kScale = 1024;  // one chunk left wholly unchanged
  uint32_t paused_ = 0;     // windows left without keeping
};

}  // namespace gms::policy
