#pragma once
// The slab allocator of movable memory: reservations of the program's address space (slabs) cut
// into chunks (policy/arena.h decides where an allocation goes), the table of backed chunks, the
// chunks with nothing live kept for the next allocation, and the tags of stream-ordered frees
// whose space may still be in use.
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "act/swap.h"
#include "backing.h"
#include "marks.h"
#include "policy/arena.h"

namespace gms::act::swap {

// One chunk of a slab, backed: the unit that is mapped, moved and tracked.
struct Range {
  uint64_t size = 0;  // chunk_bytes()
  int dev = 0;
  Chunk chunk;
  RangeMarks marks;  // scan order
};

using Tag = policy::Arena::Tag;

// A reservation of the program's address space where movable allocations go (policy/arena.h),
// chunk aligned, so that the chunk of an address is the address rounded down.
struct Slab {
  CUdeviceptr reserved = 0;  // what cuMemAddressFree takes
  uint64_t reserved_size = 0;
  uintptr_t base = 0;
  int dev = 0;
  policy::Arena arena;
  Slab(const policy::Arena::Config& c) : arena(c) {}
  uintptr_t chunk_base(uint64_t c) const { return base + c * arena.chunk_bytes(); }
  uint64_t chunk_at(uintptr_t a) const { return (a - base) / arena.chunk_bytes(); }
  bool holds(uintptr_t a) const { return a >= base && a - base < arena.chunks() * arena.chunk_bytes(); }
};

// The state of this part. Caller holds mu().
struct Slabs {
  std::unordered_map<uintptr_t, Range> ranges;  // every backed chunk, by its base: one chunk each
  std::vector<std::unique_ptr<Slab>> slabs;
  // Backed chunks with nothing live, oldest first, and the device memory of those on each device:
  // kept for the next allocation, the first to go for room.
  std::deque<uintptr_t> dead;
  uint64_t dead_device[kMaxDevices] = {};
  // Stream-ordered frees whose space may still be in use: the event, the slab it tags, and the
  // stream it was ordered on when no other stream can ever have its handle (own_stream), with the
  // device of its context (each context has default streams of its own).
  struct Tagged {
    Mark mark;
    Slab* slab = nullptr;
    uint64_t stream = 0;
    int stream_dev = -1;
  };
  std::unordered_map<Tag, Tagged> tags;
  std::deque<Tag> tag_order;  // oldest first; some may be gone from `tags`
  Tag next_tag = 1;

  Slab* slab_of(uintptr_t a);
  // Tells the chunk's slab how it is backed now (after a move). A chunk whose last allocation was
  // freed after its move was planned may still be moved: its device memory is counted as it is.
  void note_backing(uintptr_t chunk, const Range& r);
  // Frees whose work is over, oldest first: their space waits for nothing any more.
  void settle_tags();
  // Host-backed dead chunks (evicted, then freed) whose frees are over: their host memory back to
  // the spares, their addresses free for new chunks.
  void release_dead_hosts();
  // Dead chunk k (of `dead`) gives its memory back, once the frees of its space are over: device
  // memory to the spares with `keep`.
  void release_dead(size_t k, bool keep = false);
  // The best place for `bytes` on `dev` over all its slabs (policy::Arena::find).
  std::pair<Slab*, policy::Arena::Spot> find_spot(uint64_t bytes, int dev, bool device_only);
  // A new slab of at least `bytes` on `dev`, or null (*r says why).
  Slab* new_slab(int dev, uint64_t bytes, CUresult* r);
  // Space taken at `spot` of `sl` (grant `g`) goes to the program: its use waits for the frees it
  // covers, and its chunks that held nothing live are tracked again. Returns its address.
  CUdeviceptr hand_out(Slab& sl, const policy::Arena::Spot& spot, const policy::Arena::Grant& g, const Use& use,
                       std::vector<Woken>* woken);
  // Chunk c of `sl` holds nothing live any more: kept, backed as it is, for the next allocation.
  void bury(Slab& sl, uint64_t c);
  // The program holds no movable memory any more: every chunk, slab and tag goes back.
  void release_all();

 private:
  void drop_tag(Tag t);
  // The use of space handed out waits for the frees it covers: on the GPU when stream-ordered,
  // not at all on the default stream the free was ordered on.
  void wait_frees(const policy::Arena::Grant& g, const Use& use, int dev);
  // The chunks of `g` that held nothing live: off the dead list, to be tracked again.
  void wake(Slab& sl, const policy::Arena::Grant& g, std::vector<Woken>* woken);
  // Waits here for the frees of the chunk's free space: nothing queued before them may still use it.
  void settle_chunk(Slab& sl, uint64_t c);
  // Unmaps a chunk (unless parked) and gives its memory back (device memory to the spares with
  // `keep`); false (and a leak, rather than reusing mapped memory) when the unmap fails.
  bool unback(uintptr_t base, Range& range, bool keep);
};
Slabs& slabs();
// The pieces (2 MiB, sum_mix.h) of the chunk at `chunk` that a live allocation covers; what else
// it holds was freed or never taken, and nothing may read it again, so no move copies it (every
// piece when the chunk is in no slab). Caller holds mu().
uint32_t live_pieces(uintptr_t chunk);

}  // namespace gms::act::swap
