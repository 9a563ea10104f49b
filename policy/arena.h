#pragma once
// Where movable allocations go (policy swap): a slab of address space cut into chunks, the unit
// the shim backs with device or host memory and the residency planner moves. An allocation is a
// run of granules anywhere in the slab, across chunk boundaries, and several share a chunk.
//
// Why: with a range of its own per allocation, every allocation the budget has no freed range of
// about its size for costs a new mapping, and memory freed for room costs an unmap and a release.
// On the H100 under copies a mapping's access call alone took 0.46 ms, and resnet50 made and
// released about 157 ranges per step that way: 130 ms of a 260 ms step. Here memory the program
// frees stays mapped where it is, and any allocation that fits in it gets it with no driver call.
//
// Freed space may still be in use by work queued before the free: a stream-ordered free leaves a
// tag on it (the shim's event), and whoever gets the space must wait for its tags. Pure book-
// keeping: no CUDA, no globals.
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

namespace gms::policy {

class Arena {
 public:
  enum class Backing : uint8_t { none, device, host };
  using Tag = uint64_t;  // 0: nothing to wait for

  struct Config {
    uint64_t chunk = 64ull << 20;
    uint64_t granule = 2ull << 20;  // allocations are multiples of it, and start on one
    uint64_t chunks = 0;            // the slab's length
  };
  explicit Arena(const Config& c);

  // A place for `bytes` in free space. Only in chunks backed by the device when `device_only`
  // (nothing to map), else in chunks backed by the device or by nothing, never in host-backed
  // chunks (what is live there was evicted, and the new allocation would start far away). Of the
  // runs that fit, the one with the fewest unbacked chunks to back, then the shortest (best fit),
  // then the lowest. An allocation of a chunk or more starts on a chunk boundary when the run
  // allows, so that it moves without its neighbours.
  struct Spot {
    bool ok = false;
    uint64_t offset = 0;
    uint64_t size = 0;      // the request rounded up to granules
    uint64_t unbacked = 0;  // chunks of it with no backing
  };
  Spot find(uint64_t bytes, bool device_only) const;
  // The same answer by a look at every free piece, untouched chunks too (for tests).
  Spot find_by_walk(uint64_t bytes, bool device_only) const;

  struct Grant {
    std::vector<Tag> waits;       // frees its use must wait for
    std::vector<Tag> dropped;     // tags no free space refers to any more (after the waits)
    std::vector<uint64_t> woken;  // chunks that held nothing live before
  };
  // Takes [offset, offset + size), which must lie in free space (a Spot's); false if it does not.
  bool take(uint64_t offset, uint64_t size, Grant* g);

  struct Freed {
    bool ok = false;              // offset was the start of a live allocation
    uint64_t size = 0;
    std::vector<uint64_t> dead;   // chunks that hold nothing live any more
  };
  // The allocation at `offset` is freed; its space waits for `tag` (0: for nothing).
  Freed give(uint64_t offset, Tag tag);

  // The free tagged so is over: its space waits for it no more. The caller recycles the tag.
  void settle(Tag tag);
  // Tags on free space in the chunk (what must be over before its memory goes).
  std::vector<Tag> tags_in(uint64_t chunk) const;

  void set_backing(uint64_t chunk, Backing b);
  Backing backing(uint64_t chunk) const { return backing_[chunk]; }
  uint64_t live_in(uint64_t chunk) const { return live_in_[chunk]; }
  uint64_t size_of(uint64_t offset) const;  // of the live allocation there; 0: none
  // The granules of the chunk that a live allocation covers: bit k for granule k (a chunk of at
  // most 32 granules; more set the rest). What no live allocation covers was freed or never taken,
  // and no one may read it again: a move need not copy it.
  uint32_t live_granules(uint64_t chunk) const;
  // Chunks [first, last] that [offset, offset + size) touches.
  uint64_t first_chunk(uint64_t offset) const { return offset / cfg_.chunk; }
  uint64_t last_chunk(uint64_t offset, uint64_t size) const { return (offset + size - 1) / cfg_.chunk; }
  bool empty() const { return live_.empty(); }
  uint64_t chunks() const { return cfg_.chunks; }
  uint64_t chunk_bytes() const { return cfg_.chunk; }

 private:
  struct Piece {
    uint64_t size = 0;
    std::vector<Tag> tags;
  };
  // Counts references, and widens each tag's chunks by `chunk` (that of `to`).
  void add_tags(std::vector<Tag>& to, const std::vector<Tag>& from, uint64_t chunk);
  void unref(const std::vector<Tag>& tags, std::vector<Tag>* dropped);
  void add_live(uint64_t offset, uint64_t size, int sign, std::vector<uint64_t>* changed);
  Spot find_from(uint64_t bytes, bool device_only, uint64_t pristine) const;
  // The free space over device-backed chunks, as find_from cuts it into stretches (maximal, across
  // chunk boundaries), kept by (length, start) and by start: find(device_only), at every reuse of
  // freed memory, then looks at the shortest stretch that fits instead of walking every free run
  // of the slab. Kept up to date where space is taken (unstretch), freed (stretch, which joins the
  // neighbours) and where a chunk's backing changes, without a walk.
  void put_stretch(uint64_t a, uint64_t b);
  void unstretch(uint64_t lo, uint64_t hi);
  void stretch(uint64_t lo, uint64_t hi);
  Spot find_stretch(uint64_t need) const;

  Config cfg_;
  std::map<uint64_t, Piece> free_;       // offset -> free run, within one chunk; merged there
  std::map<uint64_t, uint64_t> live_;    // offset -> size
  std::vector<uint64_t> live_in_;        // live bytes per chunk
  std::vector<Backing> backing_;
  // Each tag's free runs, and the chunks its free covered: a tag moves between runs only within a
  // chunk (runs are merged and split there, never across a boundary), so settling it looks there
  // alone, not at every run of the slab (thousands, at a free each).
  struct TagRuns {
    uint32_t refs = 0;
    uint64_t first_chunk = 0, last_chunk = 0;
  };
  std::unordered_map<Tag, TagRuns> refs_;
  // Chunks from here on were never taken or backed: wholly free, untagged, unbacked.
  uint64_t touched_ = 0;
  std::set<std::pair<uint64_t, uint64_t>> stretches_;  // (length, start)
  std::map<uint64_t, uint64_t> stretch_at_;            // start -> length
};

}  // namespace gms::policy
