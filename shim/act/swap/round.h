#pragma once
// The move round of movable memory: a list of moves (act/swap.h, Move) carried out together in
// steps, each a function of its own. move() runs them in order: plan, pick_streams, wait_for_work,
// copy_outs, then in context order copy_ins and remap_and_finish, in scan order (or with no streams
// of the shim's) remap_evictions, remap_prefetches and finish.
#include <cstdint>
#include <map>
#include <vector>

#include "scan.h"
#include "slabs.h"

namespace gms::act::swap {

// A chunk to move, where it sits in the program's slab.
struct Slot {
  Move* m;
  Range* range;
  CUdeviceptr va() const { return m->base; }
  uint64_t size() const { return range->size; }
  Chunk& chunk() const { return range->chunk; }
  // Runs of neighbouring chunks are remapped together (map_span).
  bool follows(const Slot& prev) const { return range->dev == prev.range->dev && va() == prev.va() + prev.size(); }
};

struct Round {
  explicit Round(std::vector<Move>& m) : moves(m) {}
  std::vector<Move>& moves;
  struct Out {
    Slot at;
    Backing host;  // the copy: new, or the one the chunk kept when it came in (Chunk::clean)
    int sum = -1;  // with a kept copy: the slot of the sum the chunk came in with
    uint64_t salt = 0;  // and that sum's salt
    // The pieces (sum_mix.h) to copy out: with a kept copy, those whose sum changed since the
    // chunk came in (none: the kept copy is right, nothing to copy); of a lazy chunk, those it
    // holds (act/swap/fill.h); else all of them.
    uint32_t changed = ~0u;
    // A lazy chunk's: `host` is the chunk's own host memory, which it keeps whatever happens (it
    // holds the pieces the device does not).
    bool lazy = false;
    Mark copied;   // recorded after the copy (scan order)
    bool lent = false;  // context order: its device memory went to a copy in (copy_ins)
  };
  struct In {
    Slot at;
    Backing device;  // the new backing
    bool parked = false;  // the program's range has nothing mapped there
    bool copied = false;  // context order: its copy in is queued (copy_ins)
  };
  std::vector<Out> outs;
  std::vector<In> ins;
  // The shim's streams, out and in apart (on the launch's stream when it has none).
  CUstream out_stream = nullptr, in_stream = nullptr;
  bool out_pt = false, in_pt = false;
  bool apart = false;  // out and in on streams of their own, ordered by events
  bool scan = false;
  bool park = false;             // evicted chunks are left unmapped (Chunk::parked)
  std::vector<Range*> touched;   // scan order: every range moved, once
  // Device memory that copies out may still read: it backs the prefetches (after its copy out)
  // or is released once the copies are over, as are host chunks they may still write.
  struct Freed {
    Backing device;
    Mark copied;
  };
  std::multimap<uint64_t, Freed> freed;  // by size
  // Memory to give back after the round's copies: what copies in may still read or write (and
  // context order's), and what copies out may (scan order: free after the copies out alone).
  std::vector<Backing> spent_devices, spent_hosts;
  std::vector<Backing> spent_out_devices, spent_out_hosts;
  uint64_t remap_start = 0;  // for the statistics: the remaps' time
};

// The steps, in order. Caller holds mu().
// The chunks to copy out (with host memory for them) and in; false when nothing is to move.
bool plan(Round& r);
// The streams of the copies and the order of the round (scan order needs the shim's streams).
void pick_streams(Round& r, CUstream stream, bool per_thread);
// Nothing queued may write a chunk while it is copied out, or use one while its backing changes;
// false, with every move failed, when the wait fails.
bool wait_for_work(Round& r);
// Each chunk copied out into its host memory, side range to side range, but those that kept their
// host copy and whose sum did not change since they came in (scan order).
void copy_outs(Round& r);
// Evictions: the program's range backed by its host copy at once, or parked.
void remap_evictions(Round& r);
// Prefetches: new device backing (an evicted chunk's, else spare or new), filled from the host copy,
// which the chunk keeps with the sum of what came in (scan order, within the managed limit).
void remap_prefetches(Round& r);
// The end of the round's copies: marked (scan order) or waited for, and the spent memory's return.
void finish(Round& r);

// Context order, after copy_outs: nothing runs and the program waits, so the copies in start at
// once too, beside the copies out, and the program's ranges are remapped while both run
// (docs/analysis/swap-notes.md, "Context order"). Each chunk brought in gets spare or new device
// memory, else the memory of a chunk leaving, after that chunk's copy out.
void copy_ins(Round& r);
// Maps each evicted chunk's host copy and each brought-in chunk's device memory at the program's
// range, then waits for the copies and returns the spent memory.
void remap_and_finish(Round& r);

}  // namespace gms::act::swap
