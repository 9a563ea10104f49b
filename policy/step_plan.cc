#include "policy/step_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <set>

namespace gms::policy {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// One instance of an allocation in the unrolled run: made at `born`, freed at `died` (global
// kernel positions), used at `uses`.
struct Instance {
  uint32_t alloc = 0;
  int64_t born = 0, died = 0;
  std::vector<int64_t> uses;
};

// A piece of an instance: what is resident or not.
struct Unit {
  uint32_t inst = 0;
  uint32_t piece = 0;
  uint64_t bytes = 0;
};

struct Unrolled {
  int64_t period = 0, steps = 0;
  std::vector<Instance> inst;
  std::vector<Unit> units;
  std::vector<std::vector<uint32_t>> units_of;  // per instance
  std::vector<std::vector<uint32_t>> uses_at;   // per global position: instances
  std::vector<std::vector<uint32_t>> born_at, died_at;
};

// Instance index of allocation `a` alive at global position g, given the per-step instance table.
Unrolled unroll(const StepTimeline& t, const StepPlanConfig& cfg) {
  Unrolled u;
  u.period = static_cast<int64_t>(t.period());
  // One step more than measured: the measured step's last evictions see the uses after it.
  u.steps = std::max<int64_t>(2, cfg.steps) + 1;
  const int64_t n = u.period * u.steps;
  // inst_of[a][r + 1]: instance of allocation a made in step r (r = -1: the one alive at the start).
  std::vector<std::vector<int64_t>> inst_of(t.allocs.size());
  for (uint32_t a = 0; a < t.allocs.size(); ++a) {
    const StepTimeline::Alloc& x = t.allocs[a];
    inst_of[a].assign(u.steps + 1, -1);
    if (x.persistent()) {
      inst_of[a][0] = static_cast<int64_t>(u.inst.size());
      u.inst.push_back({a, 0, n, {}});
      continue;
    }
    for (int64_t r = -1; r < u.steps; ++r) {
      int64_t born = r * u.period + x.born, died = r * u.period + x.died;
      if (died <= 0) continue;
      born = std::max<int64_t>(born, 0);
      inst_of[a][r + 1] = static_cast<int64_t>(u.inst.size());
      u.inst.push_back({a, born, std::min(died, n), {}});
    }
  }
  u.uses_at.resize(n);
  u.born_at.resize(n + 1);
  u.died_at.resize(n + 1);
  for (int64_t g = 0; g < n; ++g) {
    const int64_t r = g / u.period, p = g % u.period;
    for (uint32_t a : t.kernels[p].uses) {
      const StepTimeline::Alloc& x = t.allocs[a];
      int64_t i = x.persistent() ? inst_of[a][0] : inst_of[a][(p >= x.born ? r : r - 1) + 1];
      if (i < 0) continue;  // check() rules this out
      u.inst[i].uses.push_back(g);
      u.uses_at[g].push_back(static_cast<uint32_t>(i));
    }
  }
  u.units_of.resize(u.inst.size());
  for (uint32_t i = 0; i < u.inst.size(); ++i) {
    const Instance& in = u.inst[i];
    u.born_at[in.born].push_back(i);
    u.died_at[in.died].push_back(i);
    const uint64_t bytes = t.allocs[in.alloc].bytes, piece = std::max<uint64_t>(cfg.piece_bytes, 1);
    for (uint64_t off = 0, k = 0; off < bytes || k == 0; off += piece, ++k) {
      u.units_of[i].push_back(static_cast<uint32_t>(u.units.size()));
      u.units.push_back({i, static_cast<uint32_t>(k), std::min(piece, bytes - std::min(bytes, off))});
      if (bytes == 0) break;
    }
  }
  return u;
}

// The first use of instance i after position g, or kNever (also when it dies first).
int64_t next_use(const Instance& in, int64_t g) {
  auto it = std::upper_bound(in.uses.begin(), in.uses.end(), g);
  return it == in.uses.end() ? kNever : *it;
}

// The last use of instance i before position g, or -1.
int64_t last_use_before(const Instance& in, int64_t g) {
  auto it = std::lower_bound(in.uses.begin(), in.uses.end(), g);
  return it == in.uses.begin() ? -1 : *(it - 1);
}

// A decided move in the unrolled run.
struct Decided {
  uint32_t unit;
  int64_t at;       // position that needed it
  bool to_device;
  bool copied;
};

}  // namespace

// The plan with one rule for victims (cfg.victims, not fastest).
static StepPlan plan_with(const StepTimeline& t, const StepPlanConfig& cfg) {
  StepPlan plan;
  if (t.kernels.empty()) return plan;
  const Unrolled u = unroll(t, cfg);
  const int64_t n = u.period * u.steps;
  const bool lru = cfg.victims == StepPlanConfig::Victims::least_recently_used;
  const bool slack = cfg.victims == StepPlanConfig::Victims::most_slack;
  // For most_slack: kernel time before each position (the clock), the bytes of copies in that the
  // evictions decided so far owe, by the position that needs them (a Fenwick tree over positions),
  // and when the copies out decided so far would be over.
  std::vector<double> est(n + 1, 0);
  for (int64_t g = 0; g < n; ++g) est[g + 1] = est[g] + static_cast<double>(t.kernels[g % u.period].dur_ns);
  std::vector<double> owed(n + 2, 0);
  auto owe = [&](int64_t g, double b) {
    for (int64_t i = g + 1; i <= n + 1; i += i & -i) owed[i] += b;
  };
  auto owed_by = [&](int64_t g) {  // positions [0, g]
    double s = 0;
    for (int64_t i = std::min<int64_t>(g, n) + 1; i > 0; i -= i & -i) s += owed[i];
    return s;
  };
  double out_done = 0;
  // Where the memory pressure around each position ends: the first position from it whose live
  // bytes fit the budget.
  std::vector<double> live(n + 1, 0);
  for (const Instance& in : u.inst) {
    const double b = static_cast<double>(t.allocs[in.alloc].bytes);
    live[in.born] += b;
    live[in.died] -= b;
  }
  for (int64_t g = 1; g <= n; ++g) live[g] += live[g - 1];
  std::vector<int64_t> pressure_end(n + 1, n);
  for (int64_t g = n - 1; g >= 0; --g) pressure_end[g] = live[g] <= static_cast<double>(cfg.budget) ? g : pressure_end[g + 1];

  // --- which pieces move at which kernel (positions only) ---
  std::vector<char> resident(u.units.size(), 0);
  std::vector<int64_t> key(u.units.size(), 0);  // farthest: next use; lru: last use
  std::set<std::pair<int64_t, uint32_t>> order;  // resident units by key
  uint64_t used = 0;
  std::vector<Decided> decided;
  std::vector<int64_t> now_used(u.units.size(), -1);
  std::vector<char> born_away(u.units.size(), 0);  // made on the host: no room, nothing in it yet
  std::vector<uint64_t> occupied(n, 0);  // bytes on the device at each kernel (with copies in begun before it, below)
  auto add = [&](uint32_t x, int64_t k) {
    resident[x] = 1;
    key[x] = k;
    order.insert({k, x});
    used += u.units[x].bytes;
  };
  auto remove = [&](uint32_t x) {
    resident[x] = 0;
    order.erase({key[x], x});
    used -= u.units[x].bytes;
  };
  for (int64_t g = 0; g < n; ++g) {
    for (uint32_t i : u.died_at[g]) {
      for (uint32_t x : u.units_of[i]) {
        if (resident[x]) remove(x);
      }
    }
    // Pieces this kernel uses come first (they must be on the device), then pieces made here for a
    // later kernel, which start on the host (with nothing in them yet) when everything on the device
    // is needed sooner.
    std::vector<uint32_t> need_now, need_later;
    for (uint32_t i : u.uses_at[g]) {
      for (uint32_t x : u.units_of[i]) {
        now_used[x] = g;
        if (!resident[x] && std::find(need_now.begin(), need_now.end(), x) == need_now.end()) need_now.push_back(x);
      }
    }
    for (uint32_t i : u.born_at[g]) {
      for (uint32_t x : u.units_of[i]) {
        if (now_used[x] != g) need_later.push_back(x);
      }
    }
    // Evicts until `bytes` more fit; with farthest next use only pieces used later than `limit`.
    auto make_room = [&](uint64_t bytes, int64_t limit) {
      while (used + bytes > cfg.budget && !order.empty()) {
        auto it = lru ? std::find_if(order.begin(), order.end(), [&](const auto& e) { return now_used[e.second] != g; })
                      : std::prev(order.end());
        if (slack && it != order.end() && it->first < kNever) {
          // Among the pieces used again at or after the end of the pressure (farthest first), the
          // least late; the first that is not late at all goes. (A piece that dies before its next
          // use has no next use: Belady's pick above takes it first.) At most kLooked are scored:
          // each costs two sums over the copies owed, and a step of tens of thousands of small
          // allocations would otherwise take seconds to plan.
          constexpr int kLooked = 1024;
          const double owed_now = owed_by(g);
          double best = -std::numeric_limits<double>::infinity();
          int looked = 0;
          for (auto e = order.rbegin(); e != order.rend() && e->first > limit && e->first >= pressure_end[g]; ++e) {
            if (now_used[e->second] == g) continue;
            if (looked++ == kLooked) break;
            const Unit& un = u.units[e->second];
            const int64_t nu = e->first, lu = last_use_before(u.inst[un.inst], g);
            const double b = static_cast<double>(un.bytes);
            const double in_late = est[nu] - est[g] - (owed_by(nu) - owed_now + b) / cfg.in_bytes_per_ns;
            const double out_late = est[g] - (std::max(out_done, lu >= 0 ? est[lu + 1] : 0.0) + b / cfg.out_bytes_per_ns);
            const double score = std::min(in_late, 0.0) + std::min(out_late, 0.0);
            if (score > best + 1.0) {  // ns: scores that differ by rounding are equal (ties: the farthest)
              best = score;
              it = std::prev(e.base());
              if (score >= 0) break;
            }
          }
        }
        if (it == order.end() || now_used[it->second] == g || (!lru && it->first <= limit)) return false;
        const uint32_t victim = it->second;
        const Instance& in = u.inst[u.units[victim].inst];
        const int64_t nu = next_use(in, g - 1);
        const bool returns = nu < in.died;
        const bool copied = returns || (cfg.copy_dead && last_use_before(in, g) >= 0);
        if (slack && copied) {
          const int64_t lu = last_use_before(in, g);
          const double b = static_cast<double>(u.units[victim].bytes);
          out_done = std::max(out_done, lu >= 0 ? est[lu + 1] : 0.0) + b / cfg.out_bytes_per_ns;
          if (returns) owe(nu, b);
        }
        remove(victim);
        decided.push_back({victim, g, false, copied});
      }
      return used + bytes <= cfg.budget;
    };
    for (uint32_t x : need_now) {
      const Instance& in = u.inst[u.units[x].inst];
      if (!make_room(u.units[x].bytes, -1)) plan.feasible = false;
      if (in.born != g) decided.push_back({x, g, true, true});
      add(x, lru ? g : next_use(in, g - 1));
    }
    for (uint32_t x : need_later) {
      const Instance& in = u.inst[u.units[x].inst];
      const int64_t k = next_use(in, g - 1);
      if (make_room(u.units[x].bytes, lru ? -1 : k)) {
        add(x, lru ? g : k);
      } else {
        born_away[x] = 1;
        decided.push_back({x, g, false, false});
      }
    }
    plan.max_resident = std::max(plan.max_resident, used);
    occupied[g] = used;
    // Keys after this kernel: farthest uses the next use, lru the last use (this one).
    for (uint32_t i : u.uses_at[g]) {
      const int64_t k = lru ? g : next_use(u.inst[i], g);
      for (uint32_t x : u.units_of[i]) {
        if (!resident[x]) continue;
        order.erase({key[x], x});
        key[x] = k;
        order.insert({k, x});
      }
    }
  }

  // --- when: kernels and the two directions of the link ---
  std::vector<double> start(n, 0), end(n, 0);
  std::vector<double> move_start(decided.size(), 0), move_end(decided.size(), 0);
  // Room: bytes held, and future releases (time, bytes) to draw on, earliest first.
  std::priority_queue<std::pair<double, uint64_t>, std::vector<std::pair<double, uint64_t>>, std::greater<>> releases;
  uint64_t held = 0;
  auto room_at = [&](uint64_t bytes, double not_before) {
    double t0 = not_before;
    while (held + bytes > cfg.budget && !releases.empty()) {
      held -= std::min(held, releases.top().second);
      t0 = std::max(t0, releases.top().first);
      releases.pop();
    }
    held += bytes;
    return t0;
  };
  double out_free = 0, in_free = 0;
  size_t d = 0;
  std::vector<char> held_now(u.units.size(), 0);
  std::vector<double> left_at(u.units.size(), 0);  // when each piece's last copy out ended
  for (int64_t g = 0; g < n; ++g) {
    const double prev_end = g ? end[g - 1] : 0;
    for (uint32_t i : u.died_at[g]) {
      const double at = std::max(0.0, last_use_before(u.inst[i], g) >= 0 ? end[last_use_before(u.inst[i], g)] : prev_end);
      for (uint32_t x : u.units_of[i]) {
        if (held_now[x]) releases.push({at, u.units[x].bytes});
        held_now[x] = 0;
      }
    }
    double ready = prev_end;
    // This kernel's decisions: evictions of pieces made before it first (the room they leave is
    // what the pieces made here take), then the pieces made here, then the rest.
    const size_t first_d = d;
    while (d < decided.size() && decided[d].at == g) ++d;
    auto carry_out = [&](size_t k) {
      const Decided& m = decided[k];
      const uint32_t x = m.unit;
      const Instance& in = u.inst[u.units[x].inst];
      const uint64_t bytes = u.units[x].bytes;
      if (!m.to_device) {
        const int64_t lu = last_use_before(in, g);
        const double after = lu >= 0 ? end[lu] : 0;
        if (m.copied) {
          move_start[k] = std::max(out_free, after);
          out_free = move_end[k] = move_start[k] + bytes / cfg.out_bytes_per_ns;
        } else {
          move_start[k] = move_end[k] = after;
        }
        if (held_now[x]) releases.push({move_end[k], bytes});
        held_now[x] = 0;
        left_at[x] = move_end[k];
        return;
      }
      // Not before its copy out is over (the host holds its bytes only from then), nor while a
      // kernel before the one that needs it runs with no room for it: a copy begun early holds its
      // room through every kernel it overlaps.
      double at = std::max({in_free, room_at(bytes, 0), left_at[x]});
      int64_t from = g;
      while (from > 0 && end[from - 1] > at) {
        if (occupied[from - 1] + bytes > cfg.budget) {
          at = end[from - 1];
          break;
        }
        --from;
      }
      for (int64_t q = from; q < g; ++q) occupied[q] += bytes;
      move_start[k] = at;
      in_free = move_end[k] = move_start[k] + bytes / cfg.in_bytes_per_ns;
      held_now[x] = 1;
      ready = std::max(ready, move_end[k]);
    };
    auto made_here = [&](size_t k) { return u.inst[u.units[decided[k].unit].inst].born == g; };
    for (size_t k = first_d; k < d; ++k) {
      if (!decided[k].to_device && !made_here(k)) carry_out(k);
    }
    for (uint32_t i : u.born_at[g]) {
      for (uint32_t x : u.units_of[i]) {
        if (held_now[x] || born_away[x]) continue;
        ready = std::max(ready, room_at(u.units[x].bytes, 0));
        held_now[x] = 1;
      }
    }
    for (size_t k = first_d; k < d; ++k) {
      if (decided[k].to_device || made_here(k)) carry_out(k);
    }
    start[g] = ready;
    end[g] = ready + static_cast<double>(t.kernels[g % u.period].dur_ns);
  }

  // --- the measured step: the last but one ---
  const int64_t first = n - 2 * u.period, last = n - u.period;
  const double t0 = end[first - 1];
  plan.step_ns = static_cast<uint64_t>(std::llround(end[last - 1] - t0));
  plan.kernel_ns = t.kernel_ns();
  for (int64_t g = first; g < last; ++g) plan.kernel_start_ns.push_back(std::llround(start[g] - t0));
  for (size_t k = 0; k < decided.size(); ++k) {
    const Decided& m = decided[k];
    if (m.at < first || m.at >= last) continue;
    const Unit& x = u.units[m.unit];
    const Instance& in = u.inst[x.inst];
    StepMove s;
    s.alloc = in.alloc;
    s.piece = x.piece;
    s.bytes = x.bytes;
    s.to_device = m.to_device;
    s.copied = m.copied;
    s.needed_at = m.at - first;
    const int64_t lu = m.to_device ? -1 : last_use_before(in, m.at);
    s.after = lu >= first ? lu - first : -1;
    s.start_ns = std::llround(move_start[k] - t0);
    s.end_ns = std::llround(move_end[k] - t0);
    (m.to_device ? plan.bytes_in : m.copied ? plan.bytes_out : plan.bytes_dropped) += x.bytes;
    plan.moves.push_back(s);
  }
  // What is on the device when the measured step starts: replay the decisions up to it.
  std::vector<char> on(u.units.size(), 0);
  size_t k = 0;
  for (int64_t g = 0; g < first; ++g) {
    for (uint32_t i : u.died_at[g]) {
      for (uint32_t x : u.units_of[i]) on[x] = 0;
    }
    for (uint32_t i : u.born_at[g]) {
      for (uint32_t x : u.units_of[i]) on[x] = 1;
    }
    for (; k < decided.size() && decided[k].at == g; ++k) on[decided[k].unit] = decided[k].to_device;
  }
  for (uint32_t i : u.died_at[first]) {
    for (uint32_t x : u.units_of[i]) on[x] = 0;
  }
  for (uint32_t x = 0; x < u.units.size(); ++x) {
    const Instance& in = u.inst[u.units[x].inst];
    if (on[x] && in.born < first && in.died > first) plan.resident_at_start.push_back({in.alloc, u.units[x].piece});
  }
  return plan;
}

StepPlan plan_step(const StepTimeline& t, const StepPlanConfig& cfg) {
  if (cfg.victims != StepPlanConfig::Victims::fastest) return plan_with(t, cfg);
  // Each rule wins somewhere: least recently used on the GPT-style step at peak / 1.2, the others
  // on other steps (docs/design/schedule.md, "The schedule").
  StepPlan best;
  bool first = true;
  for (StepPlanConfig::Victims v : {StepPlanConfig::Victims::most_slack, StepPlanConfig::Victims::farthest_next_use,
                                    StepPlanConfig::Victims::least_recently_used}) {
    StepPlanConfig c = cfg;
    c.victims = v;
    StepPlan p = plan_with(t, c);
    const uint64_t moved = p.bytes_in + p.bytes_out, best_moved = best.bytes_in + best.bytes_out;
    if (first || (p.feasible && !best.feasible) ||
        (p.feasible == best.feasible && (p.step_ns < best.step_ns || (p.step_ns == best.step_ns && moved < best_moved)))) {
      best = std::move(p);
      first = false;
    }
  }
  return best;
}

std::string check_plan(const StepTimeline& t, const StepPlanConfig& cfg, const StepPlan& plan) {
  const int64_t period = static_cast<int64_t>(t.period());
  if (plan.kernel_start_ns.size() != t.period()) return "the plan has no kernel times for every kernel";
  auto piece_bytes = [&](uint32_t a, uint32_t piece) {
    const uint64_t b = t.allocs[a].bytes, off = uint64_t{piece} * cfg.piece_bytes;
    return std::min(cfg.piece_bytes, b - std::min(b, off));
  };
  std::map<std::pair<uint32_t, uint32_t>, char> on;  // alive pieces: 1 on the device, 0 away
  for (uint32_t a = 0; a < t.allocs.size(); ++a) {
    if (!t.alive(a, 0)) continue;
    const StepTimeline::Alloc& x = t.allocs[a];
    if (!x.persistent() && x.born == 0) continue;  // made at kernel 0, below
    for (uint32_t piece = 0; uint64_t{piece} * cfg.piece_bytes < std::max<uint64_t>(x.bytes, 1); ++piece) on[{a, piece}] = 0;
  }
  for (const auto& r : plan.resident_at_start) {
    auto it = on.find(r);
    if (it == on.end()) return "a piece on the device at the start is not alive then";
    it->second = 1;
  }
  size_t m = 0;
  for (int64_t p = 0; p < period; ++p) {
    for (uint32_t a = 0; a < t.allocs.size(); ++a) {
      const StepTimeline::Alloc& x = t.allocs[a];
      if (x.persistent()) continue;
      if (x.died == p || x.died - period == p) std::erase_if(on, [&](const auto& e) { return e.first.first == a; });
    }
    for (uint32_t a = 0; a < t.allocs.size(); ++a) {
      const StepTimeline::Alloc& x = t.allocs[a];
      if (x.persistent() || x.born != p) continue;
      for (uint32_t piece = 0; uint64_t{piece} * cfg.piece_bytes < std::max<uint64_t>(x.bytes, 1); ++piece) on[{a, piece}] = 1;
    }
    for (; m < plan.moves.size() && plan.moves[m].needed_at == p; ++m) {
      const StepMove& mv = plan.moves[m];
      auto it = on.find({mv.alloc, mv.piece});
      const std::string what = "kernel " + std::to_string(p) + ", allocation " + std::to_string(mv.alloc) + " piece " +
                               std::to_string(mv.piece) + ": ";
      if (it == on.end()) return what + "moved while not alive";
      if (it->second == (mv.to_device ? 1 : 0)) return what + (mv.to_device ? "brought in but not away" : "evicted but not there");
      it->second = mv.to_device ? 1 : 0;
      if (mv.to_device && mv.end_ns > plan.kernel_start_ns[p]) return what + "its copy in ends after the kernel starts";
      if (!mv.to_device && mv.after >= 0 &&
          mv.start_ns < plan.kernel_start_ns[mv.after] + static_cast<int64_t>(t.kernels[mv.after].dur_ns)) {
        return what + "its copy out starts before its last use ends";
      }
    }
    uint64_t resident = 0;
    for (const auto& [key, where] : on) {
      if (where) resident += piece_bytes(key.first, key.second);
    }
    for (uint32_t a : t.kernels[p].uses) {
      for (uint32_t piece = 0; uint64_t{piece} * cfg.piece_bytes < std::max<uint64_t>(t.allocs[a].bytes, 1); ++piece) {
        auto it = on.find({a, piece});
        if (it == on.end() || !it->second) {
          return "kernel " + std::to_string(p) + " uses allocation " + std::to_string(a) + " piece " + std::to_string(piece) +
                 ", which is not on the device";
        }
      }
    }
    if (plan.feasible && resident > cfg.budget) {
      return "kernel " + std::to_string(p) + ": " + std::to_string(resident) + " bytes on the device, over the budget of " +
             std::to_string(cfg.budget);
    }
  }
  return "";
}

}  // namespace gms::policy
