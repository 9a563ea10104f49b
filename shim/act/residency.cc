#include "residency.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "act/config.h"
#include "act/cpu_pages.h"
#include "act/launch_scan.h"
#include "act/layouts.h"
#include "act/made_again.h"
#include "act/quiet.h"
#include "act/turns.h"
#include "act/swap.h"
#include "act/tables.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/runtime.h"
#include "driver/budget.h"
#include "driver/calls.h"
#include "policy/lifetime.h"
#include "policy/residency.h"
#include "policy/step_learner.h"
#include "trace/trace.h"

namespace gms::act {
namespace {

using driver::call_real;
constexpr int kMaxDevices = DeviceLedger::kMaxDevices;
// Launches an early candidate must have been idle for: the launch just before may still run.
constexpr uint64_t kEarlyMinIdle = 2;

struct State {
  std::mutex mu;  // guards everything below
  policy::ResidencyPlanner* planners[kMaxDevices] = {};
  struct Entry {
    int dev;    // its planner
    bool swap;  // movable memory (act/swap.h), else managed memory
  };
  std::unordered_map<uintptr_t, Entry> tracked;
  // The CPU's turns on the program's own managed memory (act/turns.h).
  TurnWatch turns;
  // GPUMEMSHIM_SWAP_FORECAST: how movable allocations end, the live ones, and per chunk how many
  // live allocations it holds and how many of them are expected to be freed unused.
  policy::LifetimeForecast forecast;
  struct Life {
    policy::LifetimeForecast::Key key;
    bool dies_idle;
  };
  std::unordered_map<uintptr_t, Life> lives;
  struct Census {
    uint32_t live = 0;
    uint32_t dying = 0;
  };
  std::unordered_map<uintptr_t, Census> census;
  // GPUMEMSHIM_SWAP_LEARN: each device's step learner, and the movable allocations in each chunk
  // (what the learner's next uses are asked of for the chunk).
  policy::StepLearner* learners[kMaxDevices] = {};
  std::unordered_map<uintptr_t, std::vector<uintptr_t>> allocs_in;
};

// The planner's view of the learner: a chunk needs its device memory again when the first of its
// allocations is used, and needs none once all are freed: the room that evicting it makes lasts
// until the first of those (an allocation freed before its next use is cheap to evict only when its
// free is far: the copy out is the price, and a free soon gives the room back anyway).
class ChunkNextUse final : public policy::NextUse {
 public:
  ChunkNextUse(const policy::StepLearner& learner, const State& s) : learner_(learner), s_(s) {}
  uint64_t next_use(policy::RegionId chunk) const override {
    auto it = s_.allocs_in.find(chunk);
    if (it == s_.allocs_in.end() || it->second.empty()) return kUnknown;
    uint64_t next = kNever;
    for (uintptr_t a : it->second) next = std::min(next, learner_.next_need(a));
    return next;
  }
  // Scan order knows: a launch it saw use the chunk is not over (context order: always busy, no preference).
  bool busy(policy::RegionId chunk) const override { return !swap::uses_over(chunk); }
  uint64_t now() const override { return learner_.launches(); }

 private:
  const policy::StepLearner& learner_;
  const State& s_;
};

State& state() {
  static NoDestructor<State> s;
  return *s;
}

// The launch scan's question (act/launch_scan.h). Caller holds s.mu.
bool tracked_on(uintptr_t base, int dev) {
  const State& s = state();
  auto d = s.tracked.find(base);
  return d != s.tracked.end() && d->second.dev == dev;
}

// Scan order: the movable ranges the calling thread's launch uses, from its scan to its mark.
// Fixed size (no allocation in TLS the preload may reach early); a launch that uses more ranges
// marks none, and the next round of moves waits for the context.
struct LaunchUses {
  static constexpr size_t kMax = 256;
  uintptr_t bases[kMax];
  uint32_t pieces[kMax];  // of each, those it uses (swap::await_ready)
  uint32_t n;
  bool overflow;
  bool unscanned;  // swap::finish_copies was called for it: swap::end_unscanned after it
};
thread_local LaunchUses t_uses __attribute__((tls_model("initial-exec"))) = {};

std::atomic<uint64_t> g_launch_seq{0};

bool learning() { return options().swap_learn.value && movable_policy(); }

// Caller holds s.mu. The device's step learner (GPUMEMSHIM_SWAP_LEARN), or null.
policy::StepLearner* learner(State& s, int dev) {
  if (!learning()) return nullptr;
  if (!s.learners[dev]) s.learners[dev] = new policy::StepLearner();
  return s.learners[dev];
}

policy::ResidencyPlanner& planner(State& s, int dev) {
  if (!s.planners[dev]) {
    policy::ResidencyConfig cfg;
    cfg.early = options().swap_early.value && scan_order();
    // Four chunks of lead over the GPU: a launch or two's memory in flight, so copies in are queued
    // ahead of the kernels without the lead eating what next use keeps (the sweep: docs/benchmarks.md,
    // "What recency taught, and how far ahead of the GPU").
    cfg.busy_lead = 4 * swap::chunk_bytes();
    s.planners[dev] = new policy::ResidencyPlanner(cfg);
  }
  return *s.planners[dev];
}

CUresult move(uintptr_t addr, uint64_t bytes, CUmemLocation where, CUstream stream, bool per_thread) {
  return per_thread ? call_real(GMS_REAL(cuMemPrefetchAsync_v2_ptsz), static_cast<CUdeviceptr>(addr), bytes, where, 0u, stream)
                    : call_real(GMS_REAL(cuMemPrefetchAsync_v2), static_cast<CUdeviceptr>(addr), bytes, where, 0u, stream);
}

// Caller holds s.mu. Issues the planner's actions: managed memory with prefetches on the stream,
// movable memory in one batch (act/swap.h). The first `early` are early evictions; `ahead`: the
// prefetches are for launches still to come (plan_ahead); `learnt`: room came by next use.
void carry_out(State& s, const std::vector<policy::Action>& actions, int dev, CUstream stream, bool per_thread,
               size_t early = 0, bool ahead = false, bool learnt = false) {
  if (!actions.empty()) quiet::stir(dev);  // before the round: it waits for the quiet launches (act/quiet.h)
  Stats& st = runtime_stats();
  CUmemLocation gpu{CU_MEM_LOCATION_TYPE_DEVICE, dev};
  CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
  auto done = [&](size_t k, CUresult r) {
    const policy::Action& a = actions[k];
    if (r != CUDA_SUCCESS) return;
    const bool in = a.kind == policy::ActionKind::prefetch_to_device;
    st.decision(in ? Decision::prefetched : Decision::evicted, a.bytes);
    if (k < early) st.decision(Decision::evicted_early, a.bytes);
    if (trace::enabled()) {
      trace::decision(in ? "prefetch" : "evict", a.region + a.offset, a.bytes, dev,
                      in && ahead ? "used by a launch soon (learnt step): ahead, into free room"
                      : in        ? "referenced by the kernel"
                      : k < early && learnt ? "used again farthest ahead (learnt step), room about to be needed: early, while the link is free"
                      : k < early ? "its uses are over until room would take it (learned): early, while the link is free"
                      : learnt    ? "used again farthest ahead (learnt step), for room in the budget"
                                  : "least recently used, for room in the budget");
    }
  };
  std::vector<swap::Move> moves;
  std::vector<size_t> moved;  // the action of each move
  for (size_t k = 0; k < actions.size(); ++k) {
    const policy::Action& a = actions[k];
    if (a.kind == policy::ActionKind::stay_remote) {
      st.decision(Decision::left_remote, a.bytes);
      if (trace::enabled()) trace::decision("left_remote", a.region + a.offset, a.bytes, dev, "larger than the budget, or moving back and forth");
      continue;
    }
    const bool in = a.kind == policy::ActionKind::prefetch_to_device;
    auto t = s.tracked.find(a.region);
    if (t != s.tracked.end() && t->second.swap) {
      moves.push_back({a.region, a.bytes, in, in && ahead});
      moved.push_back(k);
    } else {
      done(k, move(a.region + a.offset, a.bytes, in ? gpu : host, stream, per_thread));
    }
  }
  swap::move(moves, stream, per_thread);
  for (size_t j = 0; j < moves.size(); ++j) done(moved[j], moves[j].result);
}

// Caller holds s.mu. GPUMEMSHIM_SWAP_EARLY: puts before `actions` the early evictions of movable chunks whose uses are
// over on the GPU (a move that would wait for a kernel would hold up the launch); returns how many.
size_t evict_early(State& s, policy::ResidencyPlanner& p, std::vector<policy::Action>& actions) {
  if (!p.config().early) return 0;
  std::vector<policy::RegionId> ids = p.early_candidates(kEarlyMinIdle);
  // Oldest use first: once one is still in use on the GPU, the later ones most likely are too, and
  // each query costs a lock and event queries on every launch while the GPU lags.
  size_t n = 0;
  for (policy::RegionId id : ids) {
    auto t = s.tracked.find(id);
    if (t == s.tracked.end() || !t->second.swap) continue;
    if (!swap::uses_over(id)) break;
    ids[n++] = id;
  }
  ids.resize(n);
  if (ids.empty()) return 0;
  std::vector<policy::Action> early = p.evict_early(ids);
  actions.insert(actions.begin(), early.begin(), early.end());
  return early.size();
}

// What the planner's early eviction decided since `was`, into the statistics.
void tally_early(const policy::PlannerStats& was, const policy::PlannerStats& now) {
  Stats& st = runtime_stats();
  st.decisions(Decision::early_kept, now.early_refused - was.early_refused, now.early_refused_bytes - was.early_refused_bytes);
  st.decisions(Decision::early_excess, now.early_excess - was.early_excess, now.early_excess_bytes - was.early_excess_bytes);
}

// While it lives, the device's planner makes room by next use when the program follows a learnt
// step (GPUMEMSHIM_SWAP_LEARN). Caller holds s.mu.
class LearntRoom {
 public:
  LearntRoom(State& s, int dev) : p_(planner(s, dev)) {
    policy::StepLearner* l = learner(s, dev);
    if (l && l->state() == policy::StepLearner::State::following) {
      learner_ = l;
      next_.emplace(*l, s);
      p_.set_next_use(&*next_);
    }
  }
  ~LearntRoom() { p_.set_next_use(nullptr); }
  LearntRoom(const LearntRoom&) = delete;
  LearntRoom& operator=(const LearntRoom&) = delete;
  // The learner, when the program follows its step.
  const policy::StepLearner* following() const { return learner_; }

 private:
  policy::ResidencyPlanner& p_;
  const policy::StepLearner* learner_ = nullptr;
  std::optional<ChunkNextUse> next_;
};

// Launches ahead whose memory is brought in before they are queued: far enough for the copies to overlap the kernels
// before them, near enough that what comes in is not in the way of the room the launches in between make.
constexpr uint64_t kAhead = 8;

// Caller holds s.mu. The chunks the launches after the next one use (1 to kAhead positions ahead),
// tracked on `dev`, in the order they are used, each once.
std::vector<policy::RegionId> chunks_ahead(State& s, const policy::StepLearner& l, int dev) {
  std::vector<policy::RegionId> out;
  std::vector<uint64_t> bases;
  for (uint64_t k = 1; k <= kAhead; ++k) {
    l.uses_ahead(k, &bases);
    for (uint64_t base : bases) {
      auto r = cuda_regions().find(base);
      if (!r || r->placement != Placement::swap) continue;
      for (uintptr_t c = swap::chunk_of(r->base); c < r->base + r->size; c += swap::chunk_bytes()) {
        auto t = s.tracked.find(c);
        if (t == s.tracked.end() || t->second.dev != dev || std::find(out.begin(), out.end(), c) != out.end()) continue;
        out.push_back(c);
      }
    }
  }
  return out;
}

// Caller holds s.mu. While the program follows a learnt step, under scan order: the memory the next launches use comes
// in now, into the room the budget leaves, in the order they use it, so that its copies run while the link is free
// instead of when those launches are queued. For every launch, whether it uses movable memory itself or not.
void bring_ahead(State& s, int dev, CUstream stream, bool per_thread) {
  if (!scan_order() || !options().swap_ahead.value) return;
  policy::StepLearner* l = learner(s, dev);
  if (!l || l->state() != policy::StepLearner::State::following || driver::stream_capturing(stream, per_thread)) return;
  policy::ResidencyPlanner& p = planner(s, dev);
  std::vector<policy::Action> ahead = p.plan_ahead(chunks_ahead(s, *l, dev), budget::left(dev));
  if (ahead.empty()) return;
  ledger().set_resident(dev, p.resident_bytes());
  carry_out(s, ahead, dev, stream, per_thread, 0, true);
  swap::fit_spares(dev, 0);
}

// Scan order with parking: whether evicted chunks may be unmapped.
bool parking() {
  return scan_order() && options().swap_park.value;
}

// Caller holds s.mu. A use the scan cannot plan (its device, its kernel's layout or its stream's
// capture state unknown, as when the query failed) is work no scan sees: nothing it might reach is
// left parked or mid-copy, and the next round waits for the context.
void as_unscanned() {
  swap::finish_copies();
  t_uses.n = 0;
  t_uses.overflow = t_uses.unscanned = true;
}

// Caller holds s.mu, before the planner plans the launch: the CPU's turns on the program's own
// managed memory the launch uses (act/turns.h), and what they change for the planner.
void watch_turns(State& s, policy::ResidencyPlanner& p, const std::vector<policy::RegionId>& referenced, int dev,
                 CUstream stream, bool per_thread) {
  if (s.turns.empty()) return;
  for (policy::RegionId id : referenced) {
    switch (s.turns.before_launch(id, p.resident_bytes(id), p.launches(), dev, stream, per_thread)) {
      case TurnWatch::Planner::on_host:
        p.mark_on_host(id);
        break;
      case TurnWatch::Planner::shared:
        p.set_shared(id, true);
        break;
      case TurnWatch::Planner::unshared:
        p.set_shared(id, false);
        break;
      case TurnWatch::Planner::nothing:
        break;
    }
  }
}

// Caller holds s.mu. The launch (or copy, or memset) on `stream` uses the tracked regions
// `referenced`: the planner's moves for it, and under scan order what it waits for and marks.
// False when nothing was done (nothing referenced, or the stream is being captured).
// `ordered`: regions a pointer table may reach (act/tables.h): marked and awaited, not planned.
bool prepare_use(State& s, const std::vector<policy::RegionId>& referenced, int dev, CUstream stream, bool per_thread,
                 const std::vector<policy::RegionId>& ordered = {}) {
  if (referenced.empty() && ordered.empty()) return false;
  if (driver::stream_capturing(stream, per_thread)) {
    if (parking()) as_unscanned();  // no moves into a graph, but no parked chunk for the kernel either
    return false;
  }
  uint64_t limit = budget::limit(dev), used = ledger().used(dev);
  policy::ResidencyPlanner& p = planner(s, dev);
  const uint64_t budget = used < limit ? limit - used : 0;
  // While the program follows a learnt step, room comes from what is used again farthest ahead.
  LearntRoom learnt(s, dev);
  const policy::PlannerStats was = p.stats();
  const policy::StepLearner* following = learnt.following();
  watch_turns(s, p, referenced, dev, stream, per_thread);
  std::vector<policy::Action> actions = p.plan_launch(referenced, budget);
  const size_t early = evict_early(s, p, actions);
  tally_early(was, p.stats());
  ledger().set_resident(dev, p.resident_bytes());
  // Freed movable ranges kept for reuse hold device memory too: the first to go for room, as
  // spare memory for the prefetches.
  uint64_t kept = swap::retired_device_bytes(dev), prefetching = 0;
  for (const policy::Action& a : actions) {
    if (a.kind == policy::ActionKind::prefetch_to_device) prefetching += a.bytes;
  }
  if (kept && p.resident_bytes() + kept > budget) swap::release_retired(dev, p.resident_bytes() + kept - budget, prefetching);
  if (log_enabled(LogLevel::debug)) {
    log(LogLevel::debug, Line().str("use on device ").i64(dev).str(": ").u64(referenced.size()).str(" managed regions referenced, ")
        .u64(actions.size()).str(" actions, resident ").bytes(p.resident_bytes()).str(" of budget ").bytes(limit - used));
  }
  // Under the lock: no other thread frees a range (which may be handed out again at once) while
  // its planned moves are carried out, and no other thread's launch that uses tracked memory gets
  // in between the synchronisation and the remaps.
  carry_out(s, actions, dev, stream, per_thread, early, false, following != nullptr);
  if (!s.turns.empty()) {
    for (const policy::Action& a : actions) {
      if (a.kind == policy::ActionKind::prefetch_to_device) s.turns.prefetched(a.region, stream, per_thread);
    }
  }
  // Spare memory the moves left (and evictions' memory back from their copies) within the budget;
  // with no moves there is none new.
  if (!actions.empty()) swap::fit_spares(dev, 0);
  if (scan_order()) {
    t_uses.n = 0;
    t_uses.overflow = t_uses.unscanned = false;
    std::vector<policy::RegionId> uses = referenced;
    uses.insert(uses.end(), ordered.begin(), ordered.end());
    for (policy::RegionId id : uses) {
      auto t = s.tracked.find(id);
      if (t == s.tracked.end() || !t->second.swap ||
          std::find(t_uses.bases, t_uses.bases + t_uses.n, id) != t_uses.bases + t_uses.n) {
        continue;
      }
      if (t_uses.n == LaunchUses::kMax) {
        t_uses.overflow = true;
        break;
      }
      t_uses.pieces[t_uses.n] = t_pieces.of(id);
      t_uses.bases[t_uses.n++] = id;
    }
    t_pieces.clear();
    swap::await_ready(t_uses.bases, t_uses.pieces, t_uses.n, stream, per_thread);
    if (t_uses.overflow) {
      swap::finish_copies();  // the ranges past the list are not awaited
      t_uses.unscanned = true;
    }
  }
  return true;
}

}  // namespace

void residency_track(uintptr_t base, uint64_t size, int device, Tracked what, uint64_t resident) {
  const bool swap = what == Tracked::swap;
  // Policy off observes only; with any other policy, GPUMEMSHIM_PREFETCH decides. Movable memory
  // is always tracked: where it is counts against the budget, even when nothing moves it.
  if (!swap && (placement_config().policy == policy::PolicyKind::off || options().prefetch == Prefetch::off)) return;
  if (device < 0 || device >= kMaxDevices) return;
  ShimScope scope;
  // Before the lock: the first time, the check makes managed memory of its own and waits for a
  // prefetch of it on a stream of its own.
  if (what == Tracked::own && (size < policy::TurnsConfig{}.min_bytes || !cpu_pages_follow_managed(device))) {
    what = Tracked::managed;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!swap || resident < size) quiet::stir(device);  // it will move: launches over it are scanned
  policy::ResidencyPlanner& p = planner(s, device);
  p.add_region(base, size, resident);
  if (what == Tracked::streamed) p.set_streamed(base, true);
  ledger().set_resident(device, p.resident_bytes());
  s.tracked[base] = State::Entry{device, swap};
  if (what == Tracked::own) s.turns.track(base, size);
  g_tracked_regions.fetch_add(1, std::memory_order_relaxed);
  uintptr_t lo = g_tracked_lo.load(), hi = g_tracked_hi.load();
  if (base < lo) g_tracked_lo.store(base);
  if (base + size > hi) g_tracked_hi.store(base + size);
}

void residency_advised(uintptr_t p) {
  if (g_tracked_regions.load(std::memory_order_relaxed) == 0) return;
  ShimScope scope;
  auto r = cuda_regions().find(p);
  if (!r || r->kind != MemKind::managed) return;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto t = s.tracked.find(r->base);
  if (t != s.tracked.end() && s.turns.advised(r->base)) planner(s, t->second.dev).set_shared(r->base, false);
}

void residency_make_room(int device, uint64_t bytes) {
  if (device < 0 || device >= kMaxDevices || g_tracked_regions.load(std::memory_order_relaxed) == 0 ||
      options().prefetch == Prefetch::off) {
    return;
  }
  ShimScope scope;
  State& s = state();
  // Held while the moves are carried out: see before_launch_slow.
  std::lock_guard lock(s.mu);
  policy::ResidencyPlanner& p = planner(s, device);
  LearntRoom learnt(s, device);
  const policy::PlannerStats was = p.stats();
  std::vector<policy::Action> actions = p.plan_room(bytes, budget::left(device));
  tally_early(was, p.stats());
  ledger().set_resident(device, p.resident_bytes());
  // Not ordered after any particular stream: the context synchronisation before the copies is.
  carry_out(s, actions, device, nullptr, false, 0, false, learnt.following() != nullptr);
}

namespace {

// Caller holds s.mu. The chunks of the movable allocation [base, base + size) gain (+1) or lose (-1) it.
void count_life(State& s, uintptr_t base, uint64_t size, int dev, bool dies_idle, int sign) {
  policy::ResidencyPlanner& p = planner(s, dev);
  for (uintptr_t c = swap::chunk_of(base); c < base + size; c += swap::chunk_bytes()) {
    State::Census& n = s.census[c];
    n.live += sign;
    n.dying += dies_idle ? sign : 0;
    p.set_spared(c, n.live != 0 && n.dying == n.live);
    if (n.live == 0) s.census.erase(c);
  }
}

}  // namespace

void residency_swap_made(uintptr_t base, uint64_t size, int device) {
  if (device < 0 || device >= kMaxDevices) return;
  ShimScope scope;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (policy::StepLearner* l = learner(s, device)) {
    l->made(base, size);
    for (uintptr_t c = swap::chunk_of(base); c < base + size; c += swap::chunk_bytes()) s.allocs_in[c].push_back(base);
  }
  if (!options().swap_forecast.value) return;
  const policy::LifetimeForecast::Key key = s.forecast.made(size);
  const State::Life life{key, s.forecast.dies_idle(key)};
  if (!s.lives.emplace(base, life).second) return;
  count_life(s, base, size, device, life.dies_idle, +1);
}

void residency_swap_freed(uintptr_t base, uint64_t size, int device) {
  if (device < 0 || device >= kMaxDevices) return;
  ShimScope scope;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (policy::StepLearner* l = learner(s, device)) {
    l->freed(base);
    for (uintptr_t c = swap::chunk_of(base); c < base + size; c += swap::chunk_bytes()) {
      auto it = s.allocs_in.find(c);
      if (it == s.allocs_in.end()) continue;
      std::erase(it->second, base);
      if (it->second.empty()) s.allocs_in.erase(it);
    }
  }
  if (!options().swap_forecast.value) return;
  auto it = s.lives.find(base);
  if (it == s.lives.end()) return;
  const State::Life life = it->second;
  s.lives.erase(it);
  // A launch that uses the allocation references all its chunks: the least idle is the most recent.
  policy::ResidencyPlanner& p = planner(s, device);
  uint64_t idle = UINT64_MAX;
  for (uintptr_t c = swap::chunk_of(base); c < base + size; c += swap::chunk_bytes()) idle = std::min(idle, p.idle_launches(c));
  s.forecast.ended(life.key, idle);
  count_life(s, base, size, device, life.dies_idle, -1);
}

bool residency_on_host(uintptr_t base) {
  if (g_tracked_regions.load(std::memory_order_relaxed) == 0) return true;
  ShimScope scope;
  State& s = state();
  // Called inside a copy's queue window: a thread that holds the lock may be moving memory and
  // waiting for that window to close (policy auto has managed and movable memory side by side).
  std::unique_lock lock(s.mu, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  auto it = s.tracked.find(base);
  return it == s.tracked.end() || planner(s, it->second.dev).resident_bytes(base) == 0;
}

void residency_forget(uintptr_t base, bool (*only_if)(uintptr_t)) {
  if (g_tracked_regions.load(std::memory_order_relaxed) == 0) return;
  ShimScope scope;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.tracked.find(base);
  if (it == s.tracked.end() || (only_if && !only_if(base))) return;
  policy::ResidencyPlanner& p = planner(s, it->second.dev);
  p.remove_region(base);
  ledger().set_resident(it->second.dev, p.resident_bytes());
  s.turns.forget(base);
  s.tracked.erase(it);
  if (g_tracked_regions.fetch_sub(1, std::memory_order_relaxed) == 1) {
    g_tracked_lo.store(~uintptr_t{0});
    g_tracked_hi.store(0);
  }
}

thread_local bool t_launch_open __attribute__((tls_model("initial-exec"))) = false;
thread_local bool t_launch_traced __attribute__((tls_model("initial-exec"))) = false;

namespace {
// Opens the calling thread's queue window (swap::begin_queue) when it goes out of scope, which must
// be under the residency lock and after the thread's own moves: a round of another thread's moves
// then either comes before the window (and the work sees its remaps, after its copies) or waits for
// it to close. after_launch_slow closes it. Only movable memory needs it (the driver keeps managed
// memory coherent under its own prefetches), so other policies pay no after-hook per launch.
struct QueueWindow {
  ~QueueWindow() {
    if (!movable_policy()) return;
    t_launch_open = true;
    swap::begin_queue();
  }
};

void prepare_launch(CUfunction f, void** params, void** extra, CUstream stream, bool per_thread) {
  // Nothing ever moves; or nothing to scan and no window to open.
  if (options().prefetch == Prefetch::off || (!params && !extra && !movable_policy())) return;
  ShimScope scope;
  int dev = driver::current_device();
  if (dev < 0 || dev >= kMaxDevices) {
    if (parking()) {  // the device unknown (its query failed): nothing the kernel reaches stays parked
      std::lock_guard lock(state().mu);
      QueueWindow window;
      as_unscanned();
    }
    return;
  }
  uintptr_t lo = g_tracked_lo.load(std::memory_order_relaxed), hi = g_tracked_hi.load(std::memory_order_relaxed);
  State& s = state();
  {
    std::lock_guard lock(s.mu);
    QueueWindow window;  // after the moves, before the lock goes
    if (!params && !extra) return;
    if (quiet::unscanned(dev)) return quiet::count_launch();
    t_pieces.clear();
    std::vector<policy::RegionId> referenced, ordered;
    Words words;
    Words* collect = tables::active() ? &words : nullptr;
    if (params) {
      const std::vector<Param>& params_layout = kernel_layout(f);
      if (params_layout.empty() && scan_order() &&
          (parking() || !driver::stream_capturing(stream, per_thread))) {
        // No layout (or no parameters): the kernel may use any movable memory.
        as_unscanned();
        return;
      }
      for (size_t i = 0; i < params_layout.size(); ++i) {
        scan_bytes(static_cast<const unsigned char*>(params[i]), params_layout[i].size, lo, hi, dev, tracked_on, referenced, collect);
      }
    } else {
      // CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE: one packed buffer, laid out by the same offsets.
      const unsigned char* buf = nullptr;
      size_t size = 0;
      for (void** e = extra; e && *e != CU_LAUNCH_PARAM_END; e += 2) {
        if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = static_cast<const unsigned char*>(e[1]);
        if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) std::memcpy(&size, e[1], sizeof(size));
      }
      if (buf) scan_bytes(buf, size, lo, hi, dev, tracked_on, referenced, collect);
    }
    if (collect) {
      // What the tables among the arguments point to: used or ordered like the arguments.
      tables::Reached reached;
      tables::at_launch(f, words.all, words.movable, &reached);
      if (reached.anything) {
        as_unscanned();
        return;
      }
      for (uintptr_t w : reached.used) scan_word(w, lo, hi, dev, tracked_on, referenced);
      for (uintptr_t w : reached.ordered) scan_word(w, lo, hi, dev, tracked_on, ordered);
    }
    const bool used = prepare_use(s, referenced, dev, stream, per_thread, ordered);
    if (collect && words.program_managed && !t_uses.unscanned) {
      // What it reaches beyond its arguments is not known: as work no scan sees, after its own moves.
      swap::finish_copies();
      t_uses.overflow = t_uses.unscanned = true;
    }
    bring_ahead(s, dev, stream, per_thread);
    if (!used) return;
  }
  if (trace::enabled()) trace::budget(dev);
}
}  // namespace

void before_launch_slow(CUfunction f, void** params, void** extra, CUstream stream, bool per_thread) {
  struct Clock {  // while memory is tracked: what a program that fits pays for memory that could move
    const uint64_t t0 = g_tracked_regions.load(std::memory_order_relaxed) ? trace::monotonic_ns() : 0;
    ~Clock() { if (t0) runtime_stats().time(Timing::launch_scan_ns, trace::monotonic_ns() - t0); }
  } clock;
  const bool tracing = trace::enabled(), learn = learning();
  if (tracing || learn) {
    t_trace.n = 0;
    t_trace.stream = reinterpret_cast<uintptr_t>(driver::stream_handle(stream, per_thread));
    t_trace.fn = reinterpret_cast<uintptr_t>(f);
    t_trace.collecting = true;
    t_launch_traced = tracing;
  }
  if (g_tracked_regions.load(std::memory_order_relaxed) != 0) prepare_launch(f, params, extra, stream, per_thread);
  t_trace.collecting = false;
  if (!learn) return;
  // Every launch, after its own moves: the learner's position is the next launch's.
  ShimScope scope;
  const int dev = driver::current_device();
  if (dev < 0 || dev >= kMaxDevices || quiet::is(dev)) return;  // a quiet device has no step to learn
  const uint64_t fn = function_key(f);
  State& s = state();
  std::lock_guard lock(s.mu);
  policy::StepLearner& l = *learner(s, dev);
  const policy::StepLearner::State was = l.state();
  l.launched(fn, t_trace.regions, t_trace.n);
  // Room comes from next use now: what ping-pong stopped and what recency taught early eviction go.
  if (l.state() != was && l.state() == policy::StepLearner::State::following) planner(s, dev).step_learnt();
  if (l.state() != was && log_enabled(LogLevel::info)) {
    static const char* const kStates[] = {"searching", "recording", "following"};
    log(LogLevel::info, Line().str("step learner on device ").i64(dev).str(": ").str(kStates[static_cast<int>(l.state())])
        .str(", a step of ").u64(l.period()).str(" launches"));
  }
}

bool before_transfer_slow(uintptr_t a, uintptr_t b, CUstream stream, bool per_thread, bool* scanned) {
  const bool scan = scan_order();
  if (options().prefetch == Prefetch::off || (!scan && !movable_policy())) return false;
  ShimScope scope;
  int dev = driver::current_device();
  if (dev < 0 || dev >= kMaxDevices) {
    if (!parking()) return false;
    std::lock_guard lock(state().mu);  // the device unknown: as in before_launch_slow
    QueueWindow window;
    *scanned = false;
    as_unscanned();
    return true;
  }
  uintptr_t lo = g_tracked_lo.load(std::memory_order_relaxed), hi = g_tracked_hi.load(std::memory_order_relaxed);
  State& s = state();
  std::lock_guard lock(s.mu);
  QueueWindow window;
  *scanned = false;
  // Only the window: context order plans no transfer, and a quiet device's is work no scan saw.
  if (!scan || quiet::unscanned(dev)) return true;
  std::vector<policy::RegionId> referenced;
  t_pieces.clear();
  const uintptr_t ends[2] = {a, b};
  scan_bytes(reinterpret_cast<const unsigned char*>(ends), sizeof(ends), lo, hi, dev, tracked_on, referenced);
  // Only movable memory: moves are ordered against the copy; managed memory the driver keeps
  // coherent through a copy wherever it is, so a copy prefetches none.
  std::erase_if(referenced, [&](policy::RegionId id) {
    auto t = s.tracked.find(id);
    return t == s.tracked.end() || !t->second.swap;
  });
  // A transfer into a stream being captured is not scanned: it counts as unseen work.
  *scanned = prepare_use(s, referenced, dev, stream, per_thread) || referenced.empty();
  return true;
}

void before_pointer_query_slow(uintptr_t p) {
  if (!scan_order() || !options().swap_park.value) return;
  if (p < g_tracked_lo.load(std::memory_order_relaxed) || p >= g_tracked_hi.load(std::memory_order_relaxed)) return;
  swap::unpark(p);
}

bool before_unscanned_slow() {
  unscanned_work();
  if (!movable_policy()) return false;
  ShimScope scope;
  // Under the residency lock, as every window opens: a round of moves waiting for the windows to
  // close holds it, so no new one opens meanwhile. Scan order also waits for the shim's copies and
  // has parked chunks mapped (finish_copies); context order has none under way.
  std::lock_guard lock(state().mu);
  if (scan_order()) swap::finish_copies();
  swap::begin_queue();
  return true;
}

void after_unscanned_slow() {
  ShimScope scope;
  if (scan_order()) swap::end_unscanned();
  swap::end_queue();
}

void after_transfer_slow(CUstream stream, bool per_thread, bool scanned) {
  // Counted before the window closes: a round it wakes must not take the call for unseen work.
  if (scanned) swap::count_scanned_transfer();
  after_launch_slow(stream, per_thread, true);  // a failed one marked costs a wait
}

void after_launch_slow(CUstream stream, bool per_thread, bool launched) {
  if (t_launch_traced) {
    t_launch_traced = false;
    if (launched && trace::enabled()) {
      trace::launch(g_launch_seq.fetch_add(1, std::memory_order_relaxed), t_trace.stream, t_trace.fn, t_trace.regions, t_trace.n);
    }
  }
  if (!t_launch_open) return;
  t_launch_open = false;
  ShimScope scope;
  if (t_uses.n != 0 || t_uses.overflow) {
    swap::mark_used(t_uses.bases, t_uses.n, stream, per_thread, t_uses.overflow, launched);
    if (t_uses.unscanned) swap::end_unscanned();
    t_uses.n = 0;
    t_uses.overflow = false;
    t_uses.unscanned = false;
  }
  swap::end_queue();  // after the marks: a waiting round finds them
  tables::after_launch(stream, per_thread, launched);
}

}  // namespace gms::act
