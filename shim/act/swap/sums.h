#pragma once
// Checksums of chunks of movable memory, taken on the GPU, so that an eviction knows whether a
// chunk changed since it came in: a chunk brought in keeps its host copy (Chunk::clean) and the sum
// of what came in; when it leaves, the sum is taken again, and if it is the same the host copy is
// still right: no copy out, and its device memory is free as soon as its uses are over. Weights
// that a step only reads (decoding's every step, training's backward pass) then cross the link one
// way. The sum (sum_mix.h) changes with any changed word; it reads the chunk once at the device
// memory's speed, where a copy out crosses the link (docs/design/schedule.md).
//
// A chunk's sum is one per 2 MiB piece (sum_mix.h, kPiece), so that a chunk partly written copies
// out only the pieces that changed. Each sum has a slot: two words a piece of device memory the
// kernel adds into and as much pinned host memory it is copied to, both made in blocks when first
// needed. Caller holds mu().
#include <cstdint>

#include "base.h"

namespace gms::act::swap {

// Whether sums can be taken in the current context (its device `dev`): the module is loaded there
// on the first call; false for good where it cannot be (no PTX built in, a driver that will not
// load it), and then every eviction copies out as before.
bool sums_ready(int dev);
// A free slot of `dev`, or -1 when no more memory for slots can be made or `dev` is not the
// current context's device.
int take_sum_slot(int dev);
void give_sum_slot(int dev, int slot);
// Queues on `stream`: the sums of the pieces of the `bytes` at `p` (device memory, a multiple of 8
// bytes, at most sum::kMaxPieces pieces) salted with `salt` into `slot`, then their copy to the host,
// where sum_of reads them once the stream's work is over. A chunk's check uses the salt of its sum
// as it came in (new_salt).
CUresult queue_sum(int dev, int slot, CUdeviceptr p, uint64_t bytes, uint64_t salt, CUstream stream);
uint64_t new_salt();
// The sums in `slot` (two words a piece), as the last queued sum left them.
const uint64_t* sum_of(int dev, int slot);

}  // namespace gms::act::swap
