#include "launch_scan.h"

#include <algorithm>
#include <cstring>

#include "act/made_again.h"
#include "act/swap.h"
#include "act/textures.h"
#include "core/runtime.h"
#include "driver/budget.h"

namespace gms::act {

thread_local swap::PieceUses t_pieces __attribute__((tls_model("initial-exec"))) = {};
thread_local LaunchTrace t_trace __attribute__((tls_model("initial-exec"))) = {};

namespace {

void trace_region(uintptr_t base) {
  if (!t_trace.collecting || t_trace.n == LaunchTrace::kMax) return;
  if (std::find(t_trace.regions, t_trace.regions + t_trace.n, base) != t_trace.regions + t_trace.n) return;
  t_trace.regions[t_trace.n++] = base;
}

}  // namespace

void scan_word(uintptr_t w, uintptr_t lo, uintptr_t hi, int dev, TrackedOn tracked, std::vector<policy::RegionId>& out,
               Words* words) {
  if (words) words->all.push_back(w);
  if (w < lo || w >= hi) return;
  auto r = cuda_regions().find(w);
  if (!r || (r->kind != MemKind::managed && r->placement != Placement::swap)) return;
  trace_region(r->base);
  if (r->size > budget::limit(dev) / 4) large_used(r->base);
  if (words && r->kind == MemKind::managed && r->placement != Placement::managed) words->program_managed = true;
  if (r->placement == Placement::swap) {
    if (words) words->movable.push_back(w);
    // Movable memory: the regions are the chunks the allocation lies in.
    for (uintptr_t c = swap::chunk_of(r->base); c < r->base + r->size; c += swap::chunk_bytes()) {
      if (!tracked(c, dev)) continue;
      out.push_back(c);
      t_pieces.add(c, swap::pieces_touched(c, swap::chunk_bytes(), r->base, r->base + r->size));
    }
    return;
  }
  if (tracked(r->base, dev)) out.push_back(r->base);
}

void scan_bytes(const unsigned char* p, size_t n, uintptr_t lo, uintptr_t hi, int dev, TrackedOn tracked,
                std::vector<policy::RegionId>& out, Words* words) {
  for (size_t k = 0; k + sizeof(uintptr_t) <= n; k += sizeof(uintptr_t)) {
    uintptr_t w;
    std::memcpy(&w, p + k, sizeof(w));
    if (const uintptr_t t = texture_memory(dev, w)) scan_word(t, lo, hi, dev, tracked, out);
    scan_word(w, lo, hi, dev, tracked, out, words);
  }
}

}  // namespace gms::act
