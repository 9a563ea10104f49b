#include "report/steps.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <unordered_map>

#include "policy/step_detect.h"
#include "policy/step_floor.h"
#include "policy/step_plan.h"

namespace gms::report {
namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
// Periods are searched for over at most this many launches at the end (the search is quadratic).
constexpr size_t kSearched = 40000;

// Whether matching these launches to these kernels in order gives every function one kernel name.
bool consistent(const TraceFile& f, const std::vector<size_t>& launches, const std::vector<size_t>& kernels) {
  std::unordered_map<uint64_t, uint32_t> name_of;
  for (size_t k = 0; k < launches.size() && k < kernels.size(); ++k) {
    auto [it, fresh] = name_of.emplace(f.launches[launches[k]].fn, f.kernels[kernels[k]].name);
    if (!fresh && it->second != f.kernels[kernels[k]].name) return false;
  }
  return true;
}

// kernel_of[launch]: the kernel record of each launch, matched in order on each stream; -1 where
// none. False when the streams cannot be matched.
bool match_kernels(const TraceFile& f, const std::vector<size_t>& by_seq, std::vector<int64_t>* kernel_of) {
  std::map<uint64_t, std::vector<size_t>> launches;  // by stream handle, in seq order
  for (size_t i : by_seq) launches[f.launches[i].stream].push_back(i);
  std::map<int64_t, std::vector<size_t>> kernels;  // by CUPTI stream id, in start order
  for (size_t k = 0; k < f.kernels.size(); ++k) kernels[f.kernels[k].stream].push_back(k);
  for (auto& [id, ks] : kernels) {
    std::sort(ks.begin(), ks.end(), [&](size_t a, size_t b) { return f.kernels[a].t < f.kernels[b].t; });
  }
  kernel_of->assign(f.launches.size(), -1);
  std::vector<bool> taken;
  std::vector<const std::vector<size_t>*> groups;
  for (auto& [id, ks] : kernels) groups.push_back(&ks);
  taken.assign(groups.size(), false);
  for (auto& [stream, ls] : launches) {
    // The same count (records lost at the end of a cut trace: fewer kernels) and one name per function.
    int64_t pick = -1;
    for (size_t g = 0; g < groups.size(); ++g) {
      const size_t n = groups[g]->size();
      const bool fits = n == ls.size() || (launches.size() == 1 && groups.size() == 1 && n < ls.size());
      if (!taken[g] && fits && consistent(f, ls, *groups[g])) {
        pick = static_cast<int64_t>(g);
        break;
      }
    }
    if (pick < 0) return false;
    taken[pick] = true;
    for (size_t k = 0; k < ls.size() && k < groups[pick]->size(); ++k) (*kernel_of)[ls[k]] = static_cast<int64_t>((*groups[pick])[k]);
  }
  return true;
}

struct Life {
  uint64_t ptr = 0, bytes = 0;
  int64_t born = 0, died = kForever;  // launch positions (seq order)
  int64_t id = -1;                    // in the timeline
};

}  // namespace

StepRow find_step(const TraceSet& set, size_t fi, policy::StepTimeline* timeline, uint64_t budget) {
  const TraceFile& f = set.files[fi];
  StepRow row;
  row.file = fi;
  if (!f.devices.empty()) row.budget = static_cast<uint64_t>(std::max<int64_t>(0, f.devices[0].budget_bytes));
  if (budget) row.budget = budget;
  if (f.launches.empty()) {
    row.missing = "no launch lines (traced with a policy that tracks memory, by a shim that writes them)";
    return row;
  }
  if (f.kernels.empty()) {
    row.missing = "no kernel records (CUPTI was off)";
    return row;
  }
  std::vector<size_t> by_seq(f.launches.size());
  std::iota(by_seq.begin(), by_seq.end(), 0);
  std::sort(by_seq.begin(), by_seq.end(), [&](size_t a, size_t b) { return f.launches[a].seq < f.launches[b].seq; });
  std::vector<int64_t> kernel_of;
  if (!match_kernels(f, by_seq, &kernel_of)) {
    row.missing = "the launches and CUPTI's kernel records do not match stream by stream";
    return row;
  }
  // Launches with their kernels, in seq order (a cut trace loses the last records).
  std::vector<size_t> L;
  for (size_t i : by_seq) {
    if (kernel_of[i] >= 0) L.push_back(i);
  }
  const int64_t n = static_cast<int64_t>(L.size());
  // Keyed by the kernel's name, not its function handle: libraries that build kernels at run time
  // load the same kernel under a new handle each time (cuDNN's attention in decoding: one a token).
  std::vector<uint32_t> keys;
  for (size_t i : L) keys.push_back(f.kernels[static_cast<size_t>(kernel_of[i])].name);
  std::vector<uint32_t> tail(keys.end() - std::min(keys.size(), kSearched), keys.end());
  const policy::Period found = policy::find_period(tail);
  const int64_t P = static_cast<int64_t>(found.period);
  // The launches after the last whole step (an evaluation, a collective after the loop) are left out.
  const int64_t end = n - static_cast<int64_t>(found.tail);
  if (P == 0 || end < 3 * P) {
    row.missing = P == 0 ? "no repeating sequence of kernels" : "fewer than three whole steps";
    row.period = found.period;
    return row;
  }
  row.period = found.period;
  row.steps = std::min<uint64_t>(found.matched + found.period, static_cast<uint64_t>(end)) / found.period;
  const int64_t S = end - 2 * P;
  row.first = static_cast<uint64_t>(S);

  // Positions of host events: how many launches were queued before them.
  std::vector<int64_t> launch_t;
  for (size_t i : L) launch_t.push_back(f.launches[i].t);
  std::vector<int64_t> sorted_t = launch_t;
  std::sort(sorted_t.begin(), sorted_t.end());
  auto position = [&](int64_t t) { return std::upper_bound(sorted_t.begin(), sorted_t.end(), t) - sorted_t.begin(); };

  std::vector<Life> lives;
  {
    struct Ev {
      int64_t t;
      bool alloc;
      uint64_t ptr, bytes;
    };
    std::vector<Ev> evs;
    for (const AllocEvent& a : f.allocs) evs.push_back({a.t, true, a.ptr, a.bytes});
    for (const FreeEvent& e : f.frees) evs.push_back({e.t, false, e.ptr, e.bytes});
    std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.t < b.t; });
    std::unordered_map<uint64_t, size_t> open;
    for (const Ev& e : evs) {
      if (e.alloc) {
        open[e.ptr] = lives.size();
        lives.push_back({e.ptr, e.bytes, position(e.t), kForever, -1});
      } else if (auto it = open.find(e.ptr); it != open.end()) {
        lives[it->second].died = position(e.t);
        open.erase(it);
      }
    }
  }
  // The modelled step's allocations: made in it (their instance recurs every step), alive through it
  // (persistent), or made in the step before and freed in it (the previous instance of one made in
  // it: same size, made one step earlier).
  policy::StepTimeline t;
  std::map<std::pair<uint64_t, int64_t>, int64_t> made_at;  // (bytes, position in step) -> id
  for (Life& l : lives) {
    // Made and freed between the same two launches (DistributedDataParallel does): no kernel ran
    // while it lived, so it takes no room in the step.
    if (l.died != kForever && l.died <= l.born) continue;
    if (l.born < S || l.born >= S + P) continue;
    const int64_t b = l.born - S, d = l.died == kForever ? kForever : l.died - S;
    l.id = static_cast<int64_t>(t.allocs.size());
    policy::StepTimeline::Alloc a;
    a.bytes = l.bytes;
    if (d > b + P) {
      a.born = policy::StepTimeline::kPersistent;
    } else {
      a.born = b;
      a.died = d;
      made_at.emplace(std::pair{l.bytes, b}, l.id);
    }
    t.allocs.push_back(a);
  }
  for (Life& l : lives) {
    if (l.born >= S || l.died <= S) continue;
    if (l.died >= S + P) {
      l.id = static_cast<int64_t>(t.allocs.size());
      t.allocs.push_back({l.bytes, policy::StepTimeline::kPersistent, 0});
      continue;
    }
    auto it = made_at.find({l.bytes, l.born - S + P});
    if (it != made_at.end() && t.allocs[it->second].died > P) {
      l.id = it->second;
      continue;
    }
    // No instance of it in the step: it lives in the step from its start only. Modelled as made at
    // the step's last kernel and freed where it was: the closest cyclic life.
    l.id = static_cast<int64_t>(t.allocs.size());
    t.allocs.push_back({l.bytes, P - 1, l.died - S + P});
  }
  std::unordered_map<uint64_t, std::vector<size_t>> lives_of;
  for (size_t k = 0; k < lives.size(); ++k) {
    if (lives[k].id >= 0) lives_of[lives[k].ptr].push_back(k);
  }
  // Each kernel at its fastest over the steps the trace holds: the others ran beside copies, or
  // read memory over the link.
  for (int64_t p = 0; p < P; ++p) {
    policy::StepTimeline::Kernel k;
    k.fn = keys[S + p];
    int64_t best = kForever;
    for (int64_t g = S + p; g >= 0 && keys[g] == keys[S + p]; g -= P) {
      const KernelEvent& ke = f.kernels[kernel_of[L[g]]];
      best = std::min(best, ke.end - ke.t);
    }
    k.dur_ns = static_cast<uint64_t>(std::max<int64_t>(0, best));
    const LaunchEvent& le = f.launches[L[S + p]];
    for (uint32_t r = 0; r < le.regions; ++r) {
      auto it = lives_of.find(f.launch_regions[le.first_region + r]);
      if (it == lives_of.end()) continue;
      for (size_t li : it->second) {
        const Life& l = lives[li];
        if (l.born <= S + p && S + p < l.died) {
          k.uses.push_back(static_cast<uint32_t>(l.id));
          break;
        }
      }
    }
    std::sort(k.uses.begin(), k.uses.end());
    k.uses.erase(std::unique(k.uses.begin(), k.uses.end()), k.uses.end());
    t.kernels.push_back(std::move(k));
  }
  if (std::string why = t.check(); !why.empty()) {
    row.missing = "the step's timeline does not hold together: " + why;
    return row;
  }

  // The step as it ran.
  const KernelEvent& before = f.kernels[kernel_of[L[S - 1]]];
  const KernelEvent& last = f.kernels[kernel_of[L[S + P - 1]]];
  const int64_t t0 = before.end, t1 = last.end;
  row.measured_ns = t1 - t0;
  for (int64_t g = S; g < S + P; ++g) {
    const KernelEvent& ke = f.kernels[kernel_of[L[g]]];
    row.busy_ns += std::min(ke.end, t1) - std::max(ke.t, t0);
  }
  row.idle_ns = std::max<int64_t>(0, row.measured_ns - row.busy_ns);
  // Where the idle time went: copies running and no kernel (copies not overlapped), or nothing on
  // the GPU at all (the host's waits: remaps, synchronisations, launches not yet queued).
  // And whether the link's two directions ran at once (copies in beside copies out).
  std::vector<std::pair<int64_t, int>> edges;  // time, +-1 kernels, +-2 copies in, +-3 copies out
  for (int64_t g = S; g < S + P; ++g) {
    const KernelEvent& ke = f.kernels[kernel_of[L[g]]];
    edges.push_back({std::max(ke.t, t0), 1});
    edges.push_back({std::min(ke.end, t1), -1});
  }
  for (const MemcpyEvent& m : f.memcpys) {
    if (m.end <= t0 || m.t >= t1 || (m.copy_kind != set.ids.htod && m.copy_kind != set.ids.dtoh)) continue;
    const int kind = m.copy_kind == set.ids.htod ? 2 : 3;
    edges.push_back({std::max(m.t, t0), kind});
    edges.push_back({std::min(m.end, t1), -kind});
  }
  std::sort(edges.begin(), edges.end());
  int running[4] = {};  // by |code|
  for (size_t e = 0; e < edges.size(); ++e) {
    const int64_t span = e > 0 ? edges[e].first - edges[e - 1].first : 0;
    if (running[1] == 0 && running[2] + running[3] > 0) row.idle_copying_ns += span;
    if (running[2] > 0 && running[3] > 0) row.copy_both_ns += span;
    running[std::abs(edges[e].second)] += edges[e].second > 0 ? 1 : -1;
  }
  row.idle_copying_ns = std::min(row.idle_copying_ns, row.idle_ns);
  for (const MemcpyEvent& m : f.memcpys) {
    if (m.end <= t0 || m.t >= t1) continue;
    const int64_t ns = std::min(m.end, t1) - std::max(m.t, t0);
    if (m.copy_kind == set.ids.htod) {
      row.copied_in += m.bytes;
      row.copy_in_ns += ns;
    } else if (m.copy_kind == set.ids.dtoh) {
      row.copied_out += m.bytes;
      row.copy_out_ns += ns;
    }
  }

  // What the budget allows.
  row.kernel_ns = static_cast<int64_t>(t.kernel_ns());
  row.peak_bytes = t.peak_bytes();
  if (row.budget > 0 && row.budget < row.peak_bytes) {
    policy::StepPlanConfig cfg;
    cfg.budget = row.budget;
    const policy::StepPlan plan = policy::plan_step(t, cfg);
    row.feasible = plan.feasible;
    row.bound_ns = static_cast<int64_t>(plan.step_ns);
    const policy::StepFloor floor = policy::step_floor(t, cfg);
    row.floor_ns = static_cast<int64_t>(floor.ns);
    if (floor.at >= 0) {
      row.floor_at = floor.at;
      row.floor_kernel = set.strings.str(keys[static_cast<size_t>(S + floor.at)]);
      row.floor_away = floor.away;
      row.floor_out_ns = static_cast<int64_t>(floor.out_ns);
      row.floor_in_ns = static_cast<int64_t>(floor.in_ns);
    }
    row.plan_in = plan.bytes_in;
    row.plan_out = plan.bytes_out;
    row.plan_dropped = plan.bytes_dropped;
    cfg.copy_dead = true;
    const policy::StepPlan copied = policy::plan_step(t, cfg);
    row.bound_copied_ns = static_cast<int64_t>(copied.step_ns);
    row.floor_copied_ns = static_cast<int64_t>(policy::lower_bound_ns(t, cfg));
    row.plan_copied_out = copied.bytes_out;
  }
  if (timeline) *timeline = std::move(t);
  return row;
}

}  // namespace gms::report
