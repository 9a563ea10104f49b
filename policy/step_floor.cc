#include "policy/step_floor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace gms::policy {
namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::min();   // no use before p
constexpr int64_t kDead = std::numeric_limits<int64_t>::max();   // freed before its next use

// An allocation alive at p and not used by p: it may be away there.
struct Away {
  double bytes;
  int64_t last, next;  // its last use before p and its next use after it (positions, p - P .. p + P)
};

// A copy's term in a window, and the cut position where it starts or stops counting.
struct Term {
  int64_t at;
  double value;
};

// The first candidates, in their order, that make `need` bytes: how many, and the bytes the last
// of them gives (what the others leave).
struct Taken {
  size_t n = 0;
  double last = 0;
};
Taken take(const std::vector<Away>& cand, double need) {
  Taken taken;
  for (double left = need; taken.n < cand.size() && left > 0; ++taken.n) {
    taken.last = std::min(left, cand[taken.n].bytes);
    left -= cand[taken.n].bytes;
  }
  return taken;
}

}  // namespace

uint64_t lower_bound_ns(const StepTimeline& t, const StepPlanConfig& cfg) { return step_floor(t, cfg).ns; }

StepFloor step_floor(const StepTimeline& t, const StepPlanConfig& cfg) {
  StepFloor floor;
  const int64_t period = static_cast<int64_t>(t.period());
  if (period == 0) return floor;
  std::vector<std::vector<int64_t>> uses(t.allocs.size());
  for (int64_t p = 0; p < period; ++p) {
    for (uint32_t a : t.kernels[p].uses) uses[a].push_back(p);
  }
  std::vector<double> before(period + 1, 0.0);  // kernel time before position p of the step
  for (int64_t p = 0; p < period; ++p) before[p + 1] = before[p] + static_cast<double>(t.kernels[p].dur_ns);
  const double all = before[period];
  // Kernel time before position x of the unrolled run (x may be in the step before or after).
  auto K = [&](int64_t x) {
    const int64_t s = x >= 0 ? x / period : -((-x + period - 1) / period);
    return before[x - s * period] + static_cast<double>(s) * all;
  };

  double best = all, most_out = 0;
  std::vector<Away> cand;
  std::vector<Term> outs, ins;
  std::vector<double> out_from;  // out_from[k]: the largest of outs[0..k]
  for (int64_t p = 0; p < period; ++p) {
    double live = 0, free_away = 0;
    cand.clear();
    for (uint32_t a = 0; a < t.allocs.size(); ++a) {
      if (!t.alive(a, static_cast<uint64_t>(p))) continue;
      const StepTimeline::Alloc& x = t.allocs[a];
      const double b = static_cast<double>(x.bytes);
      live += b;
      if (std::binary_search(uses[a].begin(), uses[a].end(), p)) continue;  // on the device at p
      // The instance alive at p: born at `from`, freed at `death` (this step's frame).
      const bool current = x.persistent() || (x.born <= p && p < x.died);
      const int64_t from = x.persistent() ? kNone : current ? x.born : x.born - period;
      const int64_t death = x.persistent() ? kDead : current ? x.died : x.died - period;
      int64_t last = kNone, next = kDead;
      for (int64_t q : uses[a]) {
        for (int64_t g : {q - period, q, q + period}) {  // its uses in this frame, the step before and after
          if (g < from || g >= death) continue;
          if (g < p) last = std::max(last, g);
          if (g > p) next = std::min(next, g);
        }
      }
      if (last == kNone || (next == kDead && !cfg.copy_dead)) {
        // Nothing in it yet (neither copy carries anything: its first use only needs room), or
        // never used again and dropped: away at no cost.
        free_away += b;
        continue;
      }
      cand.push_back({b, last, next});
    }
    const double need = live - free_away - static_cast<double>(cfg.budget);
    if (need <= 0) continue;
    most_out = std::max(most_out, need);  // each byte away at p left once in the step before it

    // Copies out: the bytes last used earliest need the least time before p. Of those taken, the
    // ones last used at or after l leave after l's kernel, so p starts at least at kernel time
    // K(l + 1) + (their bytes) / rate; counted from a cut c, only those with l >= c.
    std::sort(cand.begin(), cand.end(), [](const Away& x, const Away& y) { return x.last < y.last; });
    outs.clear();
    double bytes = 0;
    Taken taken = take(cand, need);
    for (size_t i = taken.n; i-- > 0;) {
      bytes += i + 1 == taken.n ? taken.last : cand[i].bytes;
      outs.push_back({cand[i].last, K(cand[i].last + 1) + bytes / cfg.out_bytes_per_ns});
    }
    // Copies in: those used again latest (or never) need the least time after p. Of those taken,
    // the ones used again by n are in before n starts: (their bytes) / rate, then the kernel time
    // from n to the cut's end c + P; counted only when n <= c + P.
    std::sort(cand.begin(), cand.end(), [](const Away& x, const Away& y) { return x.next > y.next; });
    ins.clear();
    bytes = 0;
    taken = take(cand, need);
    for (size_t i = taken.n; i-- > 0;) {
      if (cand[i].next == kDead) break;  // never comes back
      bytes += i + 1 == taken.n ? taken.last : cand[i].bytes;
      ins.push_back({cand[i].next - period, bytes / cfg.in_bytes_per_ns - K(cand[i].next)});
    }
    // A cut c in (p - P, p] puts both windows in one step: the step is at least
    // tb + ta = (max(K(p), outs from c) - K(c)) + (K(c + P) + max(-K(p), ins to c + P)).
    // outs leave the sum as c grows and ins join it, so the largest sum is at the lowest cut or
    // where an in joins. outs are in decreasing l, ins in increasing n.
    out_from.assign(outs.size(), 0);
    for (size_t k = 0; k < outs.size(); ++k) out_from[k] = std::max(k ? out_from[k - 1] : K(p), outs[k].value);
    double in_to = -K(p);
    size_t o = outs.size();  // outs[0..o) have l >= c
    auto sum_at = [&](int64_t c) {
      while (o > 0 && outs[o - 1].at < c) --o;
      const double tb = (o ? out_from[o - 1] : K(p)) - K(c), ta = K(c + period) + in_to;
      if (tb + ta > best) {
        best = tb + ta;
        floor.at = p;
        floor.cut = c;
        floor.away = static_cast<uint64_t>(need);
        floor.out_ns = static_cast<uint64_t>(std::llround(tb));
        floor.in_ns = static_cast<uint64_t>(std::llround(ta));
      }
    };
    sum_at(p - period + 1);
    for (const Term& in : ins) {
      in_to = std::max(in_to, in.value);
      sum_at(std::max(in.at, p - period + 1));
    }
  }
  if (most_out / cfg.out_bytes_per_ns > best) {
    best = most_out / cfg.out_bytes_per_ns;
    floor.at = -1;
  }
  floor.ns = static_cast<uint64_t>(std::llround(best));
  if (floor.at < 0) floor = StepFloor{floor.ns};
  return floor;
}

}  // namespace gms::policy
