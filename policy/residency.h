// Residency planner: which managed regions to prefetch to one device, which to evict to the host,
// and which to leave mapped remotely, decided before each kernel launch.
//
// Why (measured on the project's H100, PCIe Gen5, see SCENARIOS.md): managed memory that moves on
// GPU page faults crawls at 4 to 6 GB/s; the same data prefetched with cudaMemPrefetchAsync moves at
// 46 GB/s, after which the kernel runs at device speed. So every region a launch references is
// prefetched while it fits in the budget, making room by evicting the least recently used regions
// the launch does not reference. But a region mapped remotely (preferred location host, accessed by
// the GPU) is read by the GPU over the link at 38 to 40 GB/s with no migration at all: nearly as fast
// as a prefetch, and paid only for the bytes the kernel touches. So a region larger than the whole
// budget, or one that keeps being evicted and brought back (ping-pong), is better left remote than
// thrashed through fault-driven or repeated migrations.
//
// Pure decision code: no CUDA, no globals, no I/O. The shim (shim/act) carries out the actions.
#pragma once

#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gms::policy {

struct ResidencyConfig {
  // Granularity of eviction and prefetch. Clamped to [kMinChunk, kMaxChunk] and rounded down to a
  // multiple of kMinChunk (the driver's large page).
  uint64_t chunk_bytes = 64ull << 20;
  // A region stops moving when it would make more than this many round trips (evicted, then
  // prefetched again) within `pingpong_window` launches. 0: stop at the first round trip.
  uint32_t pingpong_limit = 3;
  // In launches. A prefetch is a round trip when the region's chunks were evicted fewer than
  // `pingpong_window` launches earlier; round trips count while fewer than `pingpong_window`
  // launches old. 0 turns ping-pong detection off.
  uint64_t pingpong_window = 64;
  // Early eviction (see the rules): off, no region becomes a candidate. `early_min_gap`: in
  // launches, what counts as a long absence.
  bool early = false;
  uint64_t early_min_gap = 32;
  // Room by next use (set_next_use) passes over regions the GPU may still be using, for ones it is
  // done with, up to this many bytes (see the rules). UINT64_MAX: every busy one.
  uint64_t busy_lead = UINT64_MAX;

  static constexpr uint64_t kMinChunk = 2ull << 20;
  static constexpr uint64_t kMaxChunk = 64ull << 20;
};

using RegionId = uint64_t;

enum class ActionKind : uint8_t {
  prefetch_to_device,  // migrate [offset, offset+bytes) to the device
  evict_to_host,       // migrate [offset, offset+bytes) to the host
  stay_remote,         // leave the whole region on the host, mapped for the device (offset 0, size)
};

// A byte range within a region; `offset` is chunk aligned and the range covers whole chunks (the
// region's last chunk may be short).
struct Action {
  ActionKind kind;
  RegionId region;
  uint64_t offset;
  uint64_t bytes;
  bool operator==(const Action&) const = default;
};

// What a learner of the program's repeating step knows (policy/step_learner.h, through the shim):
// how many launches from now a region is used again. Asked only when room is needed, for the
// regions that could make it.
class NextUse {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;        // freed (or emptied) before it is used again
  static constexpr uint64_t kUnknown = UINT64_MAX - 1;  // the learner cannot say
  virtual uint64_t next_use(RegionId id) const = 0;
  // Whether the GPU may still be using the region: evicting it now waits for that, and the
  // program's thread with it.
  virtual bool busy(RegionId) const { return false; }
  // The launches next uses count from so far (a clock that only moves forward): next_use(id) == k
  // at now() == c means the use is launch c + k + 1 of that clock. The planner's own launch count
  // is not it: launches that use no region it knows do not reach it.
  virtual uint64_t now() const { return 0; }

 protected:
  ~NextUse() = default;
};

struct PlannerStats {
  uint64_t prefetched_bytes = 0;
  uint64_t evicted_bytes = 0;
  uint64_t pingpong_stops = 0;  // regions stopped for ping-pong
  uint64_t early_bytes = 0;     // of evicted_bytes, evicted early (evict_early)
  uint64_t early_excess = 0;    // early evictions room by next use shows it would not have made
  uint64_t early_excess_bytes = 0;
  uint64_t early_refused = 0;   // early candidates next use would keep, left on the device
  uint64_t early_refused_bytes = 0;
  uint64_t too_large = 0;       // stay_remote notes for regions larger than the whole budget
  uint64_t by_next_use = 0;     // evictions chosen by next use (set_next_use), not by recency
  uint64_t ahead_bytes = 0;     // of prefetched_bytes, brought ahead of their launch (plan_ahead)
};

// Rules (one device):
// - Each launch's referenced regions (unknown ids ignored, duplicates once) become the most
//   recently used, in region id order among themselves.
// - Referenced regions are prefetched whole (only their missing chunks), in argument order, each if
//   the resident bytes of all referenced regions plus its missing bytes fit the budget; one that
//   does not fit is skipped for this launch (a later, smaller one may still fit) with no action.
//   A streamed region (set_streamed) only when its missing bytes fit beside everything resident.
// - A referenced region larger than the whole budget is never prefetched; it gets one stay_remote
//   note when it becomes too large (again after it was prefetched in between).
// - Room (and any budget shrink) is made by evicting whole chunks of non-referenced regions, least
//   recently used first (ties: lower id first), each region from its end backwards, just enough;
//   regions marked to be spared (set_spared: their memory is expected to be freed unused,
//   policy/lifetime.h) only when the others do not make enough room.
//   Resident chunks of referenced regions are never evicted, even when they alone exceed the budget.
//   With a NextUse (set_next_use) that knows the step, room comes from the regions used again
//   farthest ahead instead (those freed before their next use first; the spared marks then make no
//   difference), whole, least recently used first among equals and for regions it cannot say;
//   passing over, while they add up to at most `busy_lead` bytes, those the GPU may still be using
//   (NextUse::busy) that are used again 64 launches ahead or later: in a step that uses each region
//   once, like decoding, the farthest next use is the region just used, which the GPU is likely
//   still running, and evicting it waits for that. What is passed over goes last, farthest first.
// - Ping-pong: a prefetch of a region whose chunks were evicted within the window is a round trip;
//   the round trip that would exceed `pingpong_limit` within the window is not made: the region gets
//   a stay_remote note and never moves to the device again (until removed); its resident chunks stay
//   until room is needed.
// - Early eviction (`early`): a region evicted for room after U uses since it was last brought to
//   the device (or made there), twice in a row, and each time brought back at least
//   `early_min_gap` launches after its last use, is expected to go the same way again: once it
//   has had U uses since it came back, it is an early candidate. Evicting it then (evict_early)
//   moves its copy to the host to when the link is free, instead of when the next allocation needs
//   the room (the optimizer's momentum of a training loop: used in the optimizer step, evicted
//   during the next forward pass, when the copies to the host are what the step waits for). A
//   region that comes back sooner than `early_min_gap` launches after its early eviction is never
//   evicted early again; one whose early eviction the budget did not need (it never lacked room
//   for the bytes evicted early before the region came back) not until it is evicted for room
//   twice in a row again.
//   While the step is known (set_next_use), the candidates say how much room is about to be needed
//   and next use says which regions make it: those used again farthest ahead (at least
//   `early_min_gap` launches ahead) that the GPU is done with (not NextUse::busy; the candidates
//   are not), candidates or not, as room by next use would choose them, only earlier (but for
//   regions spared, or once come back soon after an early eviction). A candidate left on the
//   device is disarmed until it has come back and had its uses again; one whose next use the
//   learner cannot say goes as without the step; when 32 regions have been asked whether the GPU
//   is done with them before enough were found, nothing goes and the candidates are disarmed
//   too. And each early
//   eviction is checked against what room by next use then does: when room is made while the
//   region is away and keeps a region used again later than it (the first it keeps for its next
//   use, not passed over for being busy), next use would have kept the region and evicted that
//   one instead: the early eviction moved bytes next use would not have, and what the region
//   taught is forgotten (it is learnt again from two evictions for room in a row); one whose use
//   came and went while it was away (the step changed) is not judged. Recency's
//   lessons, kept while following a loop larger than the budget, evict every layer after its use
//   (docs/design/schedule.md, "What recency taught early eviction").
// Resident chunks of a region always form a prefix (eviction works from the end, prefetch fills the
// rest, mark_on_host clears all), so a region's residency is one count.
// Actions: all evictions (LRU order, spared regions last), then prefetches (argument order), then stay_remote notes.
// Cost per launch: O(referenced log referenced + regions evicted from + chunks moved); per call of
// early_candidates, O(armed regions); per call of evict_early with candidates while the step is
// known, a next use of every resident region and at most 32 busy queries.
class ResidencyPlanner {
 public:
  explicit ResidencyPlanner(ResidencyConfig cfg = {});
  ResidencyPlanner(const ResidencyPlanner&) = delete;  // intrusive LRU list
  ResidencyPlanner& operator=(const ResidencyPlanner&) = delete;

  // Starts with its first `resident` bytes on the device (rounded down to whole chunks; `size` or
  // more: all of it) and the rest on the host. A region with anything resident is the most recently
  // used (it was just made there). An id already known is replaced (freed, then added).
  void add_region(RegionId id, uint64_t size, uint64_t resident = 0);
  // Freed: its resident bytes no longer count. Unknown ids are ignored.
  void remove_region(RegionId id);

  // `budget`: how many bytes of managed data this device may hold right now (device limit minus
  // ordinary device allocations). Returns the actions to issue before the launch and updates
  // residency as if they were carried out.
  std::vector<Action> plan_launch(const std::vector<RegionId>& referenced, uint64_t budget);

  // Room for `bytes` more on the device (a region about to be made there) within `budget`:
  // evictions of the least recently used chunks, the same way a launch makes room but with no
  // region protected. Returns nothing when `bytes` alone exceeds the budget.
  std::vector<Action> plan_room(uint64_t bytes, uint64_t budget);

  // Regions `ahead` (in the order upcoming launches use them) brought to the device before their
  // launches while they fit in what `budget` leaves free: prefetches of their missing chunks, with
  // no eviction, up to the first that does not fit. They become the most recently used.
  std::vector<Action> plan_ahead(const std::vector<RegionId>& ahead, uint64_t budget);

  // Resident regions expected to be used no more until they would be evicted for room (see the
  // rules), idle for at least `min_idle` launches, least recently used first.
  std::vector<RegionId> early_candidates(uint64_t min_idle);
  // Evicts the resident chunks of `ids` (early candidates the caller found idle on the GPU), or,
  // while the step is known, as many bytes of the regions next use would take first (see the
  // rules): O(resident regions) next uses and at most 32 busy queries, when `ids` is not empty.
  std::vector<Action> evict_early(const std::vector<RegionId>& ids);

  // Evict it only after every region not so marked (unknown ids ignored).
  void set_spared(RegionId id, bool spared);
  // Prefetched only into room the budget has free: read where it lies rather than evict others for
  // it (a large region spilled to be streamed; unknown ids ignored).
  void set_streamed(RegionId id, bool streamed);
  // Room by next use (null: by recency, as without it). The object must outlive its use here.
  void set_next_use(const NextUse* next) { next_ = next; }
  // The program follows a learnt step from now on (room by next use): regions stopped for
  // ping-pong may move again (the step plans its round trips), and the early evictions learnt while
  // room came from recency are forgotten, to be learnt again from the room next use makes. In a
  // loop over layers that do not all fit, recency evicts every layer, so every layer is learnt as
  // an early candidate; kept, that lesson goes on evicting each layer after its use, the first ones
  // too, which next use would keep (docs/design/schedule.md, "What recency taught early eviction").
  void step_learnt();
  // Launches since one referenced it (since it was added, if none did); 0 for unknown ids.
  uint64_t idle_launches(RegionId id) const;

  // The host touched it or copies moved it: none of it is resident any more (not an eviction, so
  // it does not count towards ping-pong).
  void mark_on_host(RegionId id);
  // Kept on the host while the CPU takes turns on it (policy/turns.h): none of it resident, never
  // prefetched until cleared (step_learnt leaves it). Unknown ids are ignored.
  void set_shared(RegionId id, bool shared);

  uint64_t resident_bytes() const { return resident_total_; }
  uint64_t resident_bytes(RegionId id) const;  // 0 for unknown ids
  // True once stopped for ping-pong, while shared, or while noted too large and not prefetched since.
  bool stays_remote(RegionId id) const;
  const PlannerStats& stats() const { return stats_; }
  const ResidencyConfig& config() const { return cfg_; }
  uint64_t launches() const { return launch_; }

 private:
  enum : uint8_t { kNone, kPrefetch, kNoteRemote };
  struct Region {
    RegionId id = 0;
    uint64_t size = 0;
    uint64_t chunks = 0;           // ceil(size / chunk)
    uint64_t resident_chunks = 0;  // resident prefix [0, resident_chunks)
    uint64_t last_ref = 0;         // launch that last referenced it; 0: never (not in the LRU list)
    uint64_t added = 0;            // launch count when it was added
    uint64_t seen = 0;             // launch stamp for de-duplicating the referenced list
    uint64_t last_evicted = 0;     // launch of the latest eviction since the last prefetch; 0: none
    std::vector<uint64_t> trips;   // launches of recent round trips (at most pingpong_limit)
    bool pingpong_stopped = false;
    bool shared = false;  // set_shared
    bool too_large_noted = false;
    bool spared = false;
    bool streamed = false;
    // Early eviction: uses since it was last made or brought to the device; the uses it had when
    // evicted for room since then (0: not so evicted); the uses after which it is expected to be
    // evicted (0: none); the launch of its early eviction since it came back (0: none), the bytes
    // it evicted and the count of tight plans by then; whether armed_ lists it.
    uint32_t uses = 0;
    uint32_t evicted_uses = 0;
    uint32_t prev_evicted_uses = 0;  // evicted_uses of the cycle before (0: none, or a short gap)
    uint32_t learned_uses = 0;
    bool early_wrong = false;        // came back soon after an early eviction: never again
    uint64_t early_at = 0;
    uint64_t early_bytes = 0;
    uint64_t tight_at_early = 0;
    uint64_t early_next_at = 0;  // the launch of its next use, known at its early eviction (0: not known)
    bool armed = false;
    uint8_t plan = kNone;          // this launch's decision, kept until its actions are written
    uint64_t plan_from = 0;        // first missing chunk when the decision is kPrefetch
    Region* prev = nullptr;  // LRU list, oldest at head
    Region* next = nullptr;
  };

  uint64_t bytes_of_chunks(const Region& r, uint64_t n) const;  // bytes of chunks [0, n)
  uint64_t resident_of(const Region& r) const { return bytes_of_chunks(r, r.resident_chunks); }
  bool within_window(uint64_t event_launch) const;
  void lru_unlink(Region* r);
  void lru_append(Region* r);
  // Evicts whole chunks, least recently used regions first, until `need` bytes are gone; skips the
  // regions the current launch references when `spare_referenced`, and spared regions unless the
  // others are not enough.
  void evict_lru(uint64_t need, bool spare_referenced, std::vector<Action>& out);
  // Evicts the region's last `n` resident chunks.
  void evict_chunks(Region& r, uint64_t n, std::vector<Action>& out);
  // The referenced region comes back to the device: what its last eviction taught.
  void came_back(Region& r);
  // A plan whose `budget` would not hold the bytes evicted early as well (`extra` bytes to come
  // included): room needed them gone.
  void note_room(uint64_t budget, uint64_t extra);
  // One pass over the LRU list: regions spared or not (`spared`); returns what is still needed.
  uint64_t evict_pass(uint64_t need, bool spare_referenced, bool spared, std::vector<Action>& out);
  // The resident regions with a known next use (not the launch's, when `spare_referenced`),
  // farthest next use first.
  std::vector<std::pair<uint64_t, Region*>> farthest_first(bool spare_referenced);
  // Evicts all of `r` early (evict_early).
  void evict_one_early(Region& r, std::vector<Action>& out);
  // Room by next use (next_): returns what is still needed.
  uint64_t evict_by_next_use(uint64_t need, bool spare_referenced, std::vector<Action>& out);
  // Evicts whole chunks of `r` from its end until `need` is met or it has none; returns what is
  // still needed.
  uint64_t evict_from(Region& r, uint64_t need, std::vector<Action>& out);

  ResidencyConfig cfg_;
  std::unordered_map<RegionId, Region> regions_;  // node-based: Region addresses are stable
  Region* lru_head_ = nullptr;
  Region* lru_tail_ = nullptr;
  uint64_t resident_total_ = 0;
  uint64_t launch_ = 0;
  PlannerStats stats_;
  std::vector<Region*> scratch_;  // the launch's referenced regions, reused between launches
  std::vector<RegionId> armed_;   // early candidates once idle
  const NextUse* next_ = nullptr;
  uint64_t early_away_ = 0;       // bytes evicted early of regions not back since
  uint64_t tight_ = 0;            // plans that needed them gone (note_room)
  // Regions away after an early eviction made while the step was known, by the launch of their
  // next use: what room by next use checks them against.
  std::set<std::pair<uint64_t, RegionId>> away_early_;
  // Room by next use kept a region the GPU is done with whose next use is `next` launches ahead:
  // the regions away early that are used before it should have stayed instead.
  void check_early(uint64_t next);
  void forget_away(Region& r);
};

}  // namespace gms::policy
