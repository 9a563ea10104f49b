#pragma once
// Chunks brought back lazily (GPUMEMSHIM_SWAP_LAZY, scan order): a chunk that comes back to the
// device gets its device memory at once, but its bytes piece by piece (2 MiB, act/swap/sum_mix.h),
// when a use the shim sees first needs them: the pieces that the allocations a launch points into
// cover. A chunk holds allocations with different futures (an activation the backward pass needs
// now beside one it needs later), and the pieces no use needs before the chunk leaves again cross
// the link neither way (docs/design/schedule.md, "Chunks brought back piece by piece"). Until every
// piece is in, the chunk keeps the host memory it came from, which holds the rest.
//
// Every path that reaches a chunk's bytes fills first: a launch or transfer the scan saw (the
// pieces it uses), work no scan sees (every live piece of every lazy chunk), the shim's own reads
// (the pieces they read). Copies in run on the shim's stream of copies in, after the copy out that
// made the host memory and after whatever last used the device memory (the round ordered both
// there), and the chunk's ready mark moves after them, which the use then waits for. Caller holds
// mu().
#include <cstdint>

#include "slabs.h"

namespace gms::act::swap {

// Whether chunks may come back piece by piece: GPUMEMSHIM_SWAP_LAZY, and one GPU visible. With
// more, another device's context could reach a chunk (a peer copy, a kernel given its address)
// where no scan of that device lists it, and the shim's streams and events, which fill needs, are
// the current context's: with one, every chunk is the current context's device's.
bool lazy_allowed();
// Copies in the pieces of `mask` the chunk does not hold yet (all: ~0u); when it then holds every
// piece, its host memory goes back once those copies are over. Returns the copies' result.
// `whole`: every piece, for a use no scan narrowed (counted apart: what lazy chunks cannot save).
CUresult fill(Range& range, uint32_t mask, bool whole = false);
// Every lazy chunk, all its live pieces (before work no scan sees).
void fill_all();

}  // namespace gms::act::swap
