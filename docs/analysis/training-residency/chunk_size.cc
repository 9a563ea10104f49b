// Offline: bytes a training step moves past a budget, by chunk size. A recorded step timeline
// (tests/data/timelines) unrolled over STEPS steps; allocations placed by the real arena
// (policy/arena.h) as the shim places them (reuse device-backed space first, else new chunks);
// residency by farthest next use over chunks (a chunk's next use: the earliest future use of an
// allocation live in it now), dead chunks released for free. Counts bytes in and out a step
// (whole chunks move), over the steps after the first two.
//   g++ -std=c++20 -O2 -I. docs/analysis/training-residency/chunk_size.cc build/policy/libgms_policy.a -o chunk_size
//   ./chunk_size TIMELINE BUDGET_MIB CHUNK_MIB [STEPS]     (DEATH=1: the tie-break below)
// Results: docs/design/schedule.md, "Smaller chunks, offline".
//
// With PIECE=2 it also counts 2 MiB pieces (GPUMEMSHIM_SWAP_LAZY; docs/design/schedule.md, "Chunks
// brought back piece by piece"), printed first: per chunk, the pieces whose bytes the device holds
// and those the host copy holds; a use copies in its allocation's pieces the device lacks (WHOLE=1:
// every live piece of the chunk, as when a chunk comes back whole) and counts as a write (the host
// copy of those pieces goes stale; READONLY=1: never, a bound for kept copies); an eviction copies
// out the live pieces the device holds and the host does not.
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/arena.h"
#include "policy/timeline.h"

using namespace gms::policy;

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  std::ifstream f(argv[1]);
  std::stringstream ss;
  ss << f.rdbuf();
  StepTimeline tl;
  std::string err;
  if (!StepTimeline::parse(ss.str(), &tl, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  const uint64_t budget = std::stoull(argv[2]) << 20;
  const uint64_t C = std::stoull(argv[3]) << 20;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 6;
  const uint64_t P = tl.period();

  // Instances: persistent allocations once, others once per step. Event list in order.
  struct Inst {
    uint32_t a;
    int64_t made, freed;  // global positions (freed: before that kernel; INT64_MAX never)
    uint64_t off = 0;
    bool placed = false;
  };
  std::vector<Inst> inst;
  std::unordered_map<uint64_t, uint32_t> key;  // (alloc, step) -> instance
  auto k = [](uint32_t a, int64_t s) { return (uint64_t(a) << 20) | uint64_t(s + 2); };
  for (uint32_t a = 0; a < tl.allocs.size(); ++a) {
    const auto& al = tl.allocs[a];
    if (al.persistent()) {
      key[k(a, -1)] = inst.size();
      inst.push_back({a, -1, INT64_MAX});
      continue;
    }
    for (int s = -1; s < steps; ++s) {  // step -1: the instance alive at the start that died in step 0
      int64_t made = int64_t(s) * P + al.born, freed = int64_t(s) * P + al.died;
      if (freed <= 0) continue;
      key[k(a, s)] = inst.size();
      inst.push_back({a, std::max<int64_t>(made, 0), freed});
    }
  }
  // Uses per instance, in order; kernel g uses instance of alloc a alive at g.
  const int64_t G = int64_t(steps) * P;
  std::vector<std::vector<uint32_t>> uses_at(G);
  std::vector<std::vector<int64_t>> use_pos(inst.size());
  for (int64_t g = 0; g < G; ++g) {
    const int64_t s = g / P, p = g % P;
    for (uint32_t a : tl.kernels[p].uses) {
      const auto& al = tl.allocs[a];
      int64_t st;
      if (al.persistent()) {
        st = -1;
      } else if (al.born <= p && p < al.died) {
        st = s;
      } else if (p < al.died - int64_t(P)) {
        st = s - 1;
      } else {
        continue;  // not alive
      }
      auto it = key.find(k(a, st));
      if (it == key.end()) continue;
      uses_at[g].push_back(it->second);
      use_pos[it->second].push_back(g);
    }
  }
  std::vector<std::vector<uint32_t>> made_at(G + 1), freed_at(G + 1);
  for (uint32_t i = 0; i < inst.size(); ++i) {
    made_at[std::max<int64_t>(inst[i].made, 0)].push_back(i);
    if (inst[i].freed < G) freed_at[inst[i].freed].push_back(i);
  }

  Arena::Config cfg;
  cfg.chunk = C;
  cfg.chunks = (96ull << 30) / C;
  Arena ar(cfg);
  std::unordered_map<uint64_t, std::set<uint32_t>> in_chunk;  // chunk -> live instances
  std::set<uint64_t> resident;                               // device-backed chunks
  const uint64_t PC = (std::getenv("PIECE") ? std::stoull(std::getenv("PIECE")) : 0) << 20;  // 0: whole chunks
  std::unordered_map<uint64_t, uint64_t> devv, hostv, written;  // per chunk: piece bitmaps
  std::vector<uint64_t> pin_step(steps), pout_step(steps);
  auto pieces_of = [&](uint32_t i, uint64_t c) {  // bitmap of instance i's pieces in chunk c
    const uint64_t lo = std::max(inst[i].off, c * C), hi = std::min(inst[i].off + tl.allocs[inst[i].a].bytes, (c + 1) * C);
    uint64_t m = 0;
    if (!PC) return uint64_t(1);
    for (uint64_t b = (lo - c * C) / PC; b <= (hi - 1 - c * C) / PC; ++b) m |= 1ull << b;
    return m;
  };
  auto live_pieces = [&](uint64_t c) { uint64_t m = 0; for (uint32_t i : in_chunk[c]) m |= pieces_of(i, c); return m; };
  auto live_pieces_except = [&](uint64_t c, uint32_t x) { uint64_t m = 0; for (uint32_t i : in_chunk[c]) if (i != x) m |= pieces_of(i, c); return m; };
  auto pc = [&](uint64_t m) { return uint64_t(__builtin_popcountll(m)) * (PC ? PC : C); };
  std::vector<uint64_t> in_step(steps), out_step(steps);
  int64_t now = 0;
  const bool death_aware = std::getenv("DEATH") != nullptr;
  auto next_use = [&](uint64_t c) {
    int64_t best = INT64_MAX, dies = 0;
    for (uint32_t i : in_chunk[c]) {
      auto& v = use_pos[i];
      auto it = std::lower_bound(v.begin(), v.end(), now);
      if (it != v.end()) best = std::min(best, *it);
      dies = std::max(dies, inst[i].freed);
    }
    // Never used again: the chunk that holds its room longest goes first; one dying within a
    // few launches is kept (its room comes back with no copy).
    if (death_aware && best == INT64_MAX) return dies - now < 8 ? int64_t(-1) : INT64_MAX / 2 + std::min<int64_t>(dies, INT64_MAX / 4);
    return best;
  };
  auto make_room = [&](uint64_t need, const std::set<uint64_t>& keep) {
    while (resident.size() * C + need > budget) {
      uint64_t victim = UINT64_MAX;
      int64_t far = -1;
      for (uint64_t c : resident) {
        if (keep.count(c)) continue;
        int64_t n = next_use(c);
        if (n > far) far = n, victim = c;
      }
      if (victim == UINT64_MAX) return false;
      resident.erase(victim);
      ar.set_backing(victim, Arena::Backing::host);
      if (!in_chunk[victim].empty()) out_step[now / P] += C;
      { uint64_t live = live_pieces(victim), m = live & devv[victim] & ~hostv[victim];
        pout_step[now / P] += pc(m); hostv[victim] |= m; devv[victim] = 0; }
    }
    return true;
  };
  for (int64_t g = 0; g < G; ++g) {
    now = g;
    for (uint32_t i : freed_at[g]) {
      if (!inst[i].placed) continue;
      Arena::Freed fr = ar.give(inst[i].off, 0);
      for (uint64_t c = inst[i].off / C; c <= (inst[i].off + tl.allocs[inst[i].a].bytes - 1) / C; ++c) {
        in_chunk[c].erase(i);
        uint64_t live = live_pieces(c);
        devv[c] &= live | ~pieces_of(i, c); hostv[c] &= live | ~pieces_of(i, c);
      }
      for (uint64_t c : fr.dead) {  // nothing live: its memory goes for free
        resident.erase(c);
        ar.set_backing(c, Arena::Backing::none);
        devv[c] = hostv[c] = 0;
      }
    }
    for (uint32_t i : made_at[g]) {
      const uint64_t bytes = tl.allocs[inst[i].a].bytes;
      Arena::Spot sp = ar.find(bytes, true);
      if (!sp.ok) sp = ar.find(bytes, false);
      if (!sp.ok) {
        std::fprintf(stderr, "no spot\n");
        return 1;
      }
      Arena::Grant gr;
      ar.take(sp.offset, sp.size, &gr);
      inst[i].off = sp.offset;
      inst[i].placed = true;
      std::set<uint64_t> keep;
      for (uint64_t c = sp.offset / C; c <= (sp.offset + sp.size - 1) / C; ++c) keep.insert(c);
      uint64_t need = 0;
      for (uint64_t c : keep) need += resident.count(c) ? 0 : C;
      make_room(need, keep);
      for (uint64_t c : keep) {
        if (!resident.count(c)) {
          if (ar.backing(c) == Arena::Backing::host && !in_chunk[c].empty()) in_step[g / P] += C;
          resident.insert(c);
          ar.set_backing(c, Arena::Backing::device);
        }
        in_chunk[c].insert(i);
        uint64_t m = pieces_of(i, c);
        uint64_t shared = m & live_pieces_except(c, i);
        // pieces shared with a live instance need their data in; the rest is fresh
        if (shared & ~devv[c]) pin_step[g / P] += pc(shared & ~devv[c]);
        devv[c] |= m; hostv[c] &= ~(m & ~shared);
      }
    }
    std::set<uint64_t> want;
    for (uint32_t i : uses_at[g]) {
      if (!inst[i].placed) continue;
      const uint64_t bytes = tl.allocs[inst[i].a].bytes;
      for (uint64_t c = inst[i].off / C; c <= (inst[i].off + bytes - 1) / C; ++c) want.insert(c);
    }
    uint64_t need = 0;
    for (uint64_t c : want) need += resident.count(c) ? 0 : C;
    auto touch = [&] {
      for (uint32_t i : uses_at[g]) {
        if (!inst[i].placed) continue;
        const uint64_t bytes = tl.allocs[inst[i].a].bytes;
        for (uint64_t c = inst[i].off / C; c <= (inst[i].off + bytes - 1) / C; ++c) {
          uint64_t m = PC ? pieces_of(i, c) : live_pieces(c);
          const uint64_t whole = std::getenv("WHOLE") ? live_pieces(c) : m;  // copy in the whole chunk
          uint64_t missing = whole & ~devv[c] & hostv[c];
          pin_step[g / P] += pc(missing);
          devv[c] |= whole;
          if (!std::getenv("READONLY")) hostv[c] &= ~m;  // a use may write: the host copy is stale
        }
      }
    };
    if (need) {
      make_room(need, want);
      for (uint64_t c : want) {
        if (resident.count(c)) continue;
        resident.insert(c);
        ar.set_backing(c, Arena::Backing::device);
        in_step[g / P] += C;
      }
    }
    touch();
  }
  double in = 0, out = 0;
  int n = 0;
  for (int s = 2; s < steps; ++s, ++n) in += in_step[s], out += out_step[s];
  double pin = 0, pout = 0;
  for (int s = 2; s < steps; ++s) pin += pin_step[s], pout += pout_step[s];
  if (PC) std::printf("pieces %llu MiB: in %.2f GB, out %.2f GB a step\n", (unsigned long long)(PC >> 20), pin / n / 1e9, pout / n / 1e9);
  std::printf("%s budget %llu MiB chunk %llu MiB: in %.2f GB, out %.2f GB a step (peak %.2f GiB)\n", argv[1],
              (unsigned long long)(budget >> 20), (unsigned long long)(C >> 20), in / n / 1e9, out / n / 1e9,
              tl.peak_bytes() / double(1ull << 30));
  return 0;
}
