// Managed memory the CPU and the GPU take turns on (ping-pong): found, kept on the host for kernels
// to read over the link while the turns go on, and given back to the residency planner once they end.
//
// Why: pages that move on faults both ways every round cost far more than the same pages left on
// the host, where the kernel reads and writes them over the link and the CPU's writes stay local;
// prefetching them both ways by hand gains little, a prefetch to the host being slow
// (docs/design/policies.md, "Managed memory the CPU and the GPU take turns on").
//
// What the shim sees: at a launch that uses the region, how many of a few sampled pages the CPU
// holds (its page table has them: /proc/self/pagemap), while the residency planner had the region
// on the device. Each such launch is one turn of the CPU. Kept on the host, the region's pages are
// always the CPU's, so whether the turns go on is learnt by probing: after a number of launches,
// the region goes back to the planner (prefetched like any other), and the CPU's next turn puts it
// back on the host with twice the wait before the next probe; launches enough with no turn end it.
//
// Pure decision code: no CUDA, no globals, no I/O.
#pragma once

#include <cstdint>
#include <unordered_map>

namespace gms::policy {

struct TurnsConfig {
  // CPU turns, each within `window` launches of the region after the one before, that make the
  // region shared (kept on the host).
  uint32_t turns_to_share = 2;
  uint64_t window = 64;
  // A launch sees a CPU turn when the CPU holds at least this share of the sampled pages: a few
  // pages read back (a result, a flag) cost little and are no reason to keep a region remote.
  double min_share = 0.25;
  // Launches of the region while shared before the first probe; each probe the CPU answers doubles
  // it, up to `max_probe`.
  uint64_t first_probe = 4;
  uint64_t max_probe = 256;
  // Regions smaller than this are never sampled: their faults cost little.
  uint64_t min_bytes = 4ull << 20;
};

enum class TurnAction : uint8_t {
  none,           // nothing to do
  bring_back,     // the CPU took it: the planner must know it is on the host (and prefetch it)
  place_on_host,  // shared: keep it on the host, mapped for the GPU; the planner leaves it
  place_back,     // a probe (or the end of the turns): the planner has it again
};

class TurnTracker {
 public:
  using RegionId = uint64_t;
  explicit TurnTracker(TurnsConfig cfg = {}) : cfg_(cfg) {}

  // A managed region of the program (ignored below `min_bytes`); a known id starts over.
  void add(RegionId id, uint64_t bytes);
  void remove(RegionId id);

  // Whether a launch of `id` should sample its pages (a known region the planner may have on the
  // device, i.e. not shared).
  bool wants_sample(RegionId id) const;

  // A launch uses `id`. `cpu_pages` of `samples` sampled pages were the CPU's (samples 0: not
  // sampled, as for a shared region). `on_device`: the planner had some of it on the device, so
  // pages the CPU holds came back on its faults (not merely never sent).
  TurnAction launched(RegionId id, uint32_t cpu_pages, uint32_t samples, bool on_device);

  bool shared(RegionId id) const;
  bool empty() const { return regions_.empty(); }
  uint64_t shares() const { return shares_; }  // times a region was placed on the host
  uint64_t probes() const { return probes_; }  // times one went back to the planner to probe
  uint64_t ended() const { return ended_; }    // turns found over (probes no CPU turn answered)

 private:
  enum class State : uint8_t { planner, shared, probing };
  struct Region {
    uint64_t launches = 0;    // launches that used it
    uint64_t last_turn = 0;   // launch (of this region) of the latest CPU turn; 0: none
    uint64_t turns = 0;       // consecutive turns, each within the window of the one before
    uint64_t gap = 1;         // most launches seen between two turns (at least 1)
    uint64_t probe_wait = 0;  // launches while shared before the next probe
    uint64_t since = 0;       // launches since it was shared, or since the probe began
    State state = State::planner;
  };

  TurnsConfig cfg_;
  std::unordered_map<RegionId, Region> regions_;
  uint64_t shares_ = 0, probes_ = 0, ended_ = 0;
};

}  // namespace gms::policy
