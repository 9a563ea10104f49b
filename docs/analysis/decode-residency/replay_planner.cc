// The residency planner and the step learner (policy/) replayed over a decoding trace's events
// (trace_events.py), the way shim/act/residency.cc drives them: 64 MiB chunks, room by next use
// while the learner follows, early eviction, the memory of the next 8 launches brought ahead into
// free room. The GPU is modelled only as how far the program runs ahead of it: a chunk is busy for
// `host_lead` launches after its last use. Prints the GB brought in a token (bytes only, no time;
// for a training step's events from timeline_events.py, a "token" is a step).
//   g++ -std=c++20 -O2 -I. replay_planner.cc build/policy/libgms_policy.a -o replay_planner
//   ./replay_planner EVENTS BUDGET_MIB LEAD_CHUNKS(-1: unbounded) HOST_LEAD_LAUNCHES EARLY(0/1)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
#include "policy/residency.h"
#include "policy/step_learner.h"
using namespace gms::policy;
constexpr uint64_t C = 64ull << 20;
struct Sim;
struct CNU final : NextUse {
  Sim* s;
  uint64_t next_use(RegionId c) const override;
  bool busy(RegionId c) const override;
  uint64_t now() const override;
};
struct Sim {
  StepLearner l;
  ResidencyPlanner p;
  std::unordered_map<uint64_t, std::vector<uint64_t>> allocs_in;  // chunk -> bases
  std::unordered_map<uint64_t, uint64_t> size_of;
  std::unordered_map<uint64_t, uint64_t> last_use;
  uint64_t now = 0, host_lead;
  uint64_t budget;
  CNU nu;
  Sim(ResidencyConfig c, uint64_t b, uint64_t h) : p(c), host_lead(h), budget(b) { nu.s = this; }
  uint64_t in = 0;
  void count(const std::vector<Action>& a) {
    for (auto& x : a) if (x.kind == ActionKind::prefetch_to_device) in += x.bytes;
  }
  struct Learnt {
    Sim& s; bool on;
    Learnt(Sim& s) : s(s), on(s.l.state() == StepLearner::State::following) { if (on) s.p.set_next_use(&s.nu); }
    ~Learnt() { s.p.set_next_use(nullptr); }
  };
  void made(uint64_t base, uint64_t bytes) {
    l.made(base, bytes);
    size_of[base] = bytes;
    for (uint64_t c = base / C * C; c < base + bytes; c += C) {
      auto& v = allocs_in[c];
      if (v.empty()) {
        Learnt lr(*this);
        auto a = p.plan_room(C, budget);
        bool room = p.resident_bytes() + C <= budget;
        p.add_region(c, C, room ? C : 0);
      }
      v.push_back(base);
    }
  }
  void freed(uint64_t base) {
    l.freed(base);
    auto it = size_of.find(base);
    if (it == size_of.end()) return;
    for (uint64_t c = base / C * C; c < base + it->second; c += C) {
      auto& v = allocs_in[c];
      v.erase(std::remove(v.begin(), v.end(), base), v.end());
      if (v.empty()) { allocs_in.erase(c); p.remove_region(c); }
    }
    size_of.erase(it);
  }
  std::vector<uint64_t> chunks_of(const std::vector<uint64_t>& bases) {
    std::vector<uint64_t> out;
    for (uint64_t b : bases) {
      auto it = size_of.find(b);
      if (it == size_of.end()) continue;
      for (uint64_t c = b / C * C; c < b + it->second; c += C)
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
    return out;
  }
  void launch(uint64_t fn, const std::vector<uint64_t>& bases) {
    ++now;
    std::vector<uint64_t> ref = chunks_of(bases);
    {
      Learnt lr(*this);
      auto a = p.plan_launch(ref, budget);
      count(a);
      for (uint64_t c : ref) last_use[c] = now;
      if (p.config().early) {
        std::vector<RegionId> ids = p.early_candidates(2), ok;
        for (auto id : ids) { if (nu.busy(id)) break; ok.push_back(id); }
        if (!ok.empty()) p.evict_early(ok);
      }
      if (lr.on) {
        std::vector<uint64_t> ahead, b;
        for (uint64_t k = 1; k <= 8; ++k) {
          l.uses_ahead(k, &b);
          for (uint64_t c : chunks_of(b)) if (std::find(ahead.begin(), ahead.end(), c) == ahead.end()) ahead.push_back(c);
        }
        count(p.plan_ahead(ahead, budget));
      }
    }
    l.launched(fn, bases.data(), bases.size());
  }
};
uint64_t CNU::next_use(RegionId c) const {
  auto it = s->allocs_in.find(c);
  if (it == s->allocs_in.end() || it->second.empty()) return kUnknown;
  uint64_t n = kNever;
  for (uint64_t a : it->second) n = std::min(n, s->l.next_need(a));
  return n;
}
uint64_t CNU::now() const { return s->l.launches(); }
bool CNU::busy(RegionId c) const {
  auto it = s->last_use.find(c);
  return it != s->last_use.end() && it->second + s->host_lead > s->now;
}
int main(int argc, char** argv) {
  ResidencyConfig cfg;
  cfg.early = atoi(argv[5]);
  cfg.busy_lead = atoll(argv[3]) < 0 ? UINT64_MAX : atoll(argv[3]) * C;
  Sim s(cfg, atoll(argv[2]) << 20, atoll(argv[4]));
  std::ifstream in(argv[1]);
  std::string line;
  int tok = 0;
  std::vector<double> per;
  uint64_t last = 0;
  while (std::getline(in, line)) {
    std::istringstream is(line);
    char c; is >> c;
    if (c == 'm') { uint64_t p, b; is >> p >> b; s.made(p, b); }
    else if (c == 'f') { uint64_t p; is >> p; s.freed(p); }
    else if (c == 'r') { per.push_back((s.in - last) / 1e9); last = s.in; ++tok; }
    else if (c == 'l') { uint64_t k, n; is >> k >> n; std::vector<uint64_t> b(n); for (auto& x : b) is >> x; s.launch(k, b); }
  }
  double sum = 0; int n = 0;
  for (size_t i = 8; i < per.size(); ++i) { sum += per[i]; ++n; }
  printf("GB in a token (tokens 8-%zu): %.2f   [", per.size() - 1, n ? sum / n : 0);
  for (size_t i = 0; i < per.size(); ++i) printf(" %.1f", per[i]);
  printf(" ]\n");
  const PlannerStats& st = s.p.stats();
  printf("evicted early %.2f GB (early evictions next use showed it would not make: %llu, candidates it kept: %llu)\n",
         st.early_bytes / 1e9, static_cast<unsigned long long>(st.early_excess),
         static_cast<unsigned long long>(st.early_refused));
}
