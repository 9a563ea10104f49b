#pragma once
// The 2 MiB pieces (act/swap/sum_mix.h) of each movable chunk that the allocations a launch (or
// transfer) points into lie in, gathered by its scan for swap::await_ready, which copies in those
// of chunks brought back lazily (act/swap/fill.h). A chunk not gathered, or past the list, counts
// as used whole. Fixed size and trivially constructible: it lives in thread-local storage that the
// preload may reach early.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "act/swap/sum_mix.h"

namespace gms::act::swap {

// The pieces of a chunk of `size`, all of them (bit k: bytes [k * 2 MiB, (k + 1) * 2 MiB)).
inline uint32_t all_pieces(uint64_t size) {
  const unsigned n = sum::pieces(size);
  return n >= 32 ? ~0u : (1u << n) - 1;
}
// Those of the chunk of `size` at `base` that [lo, hi) overlaps.
inline uint32_t pieces_touched(uintptr_t base, uint64_t size, uintptr_t lo, uintptr_t hi) {
  lo = std::max(lo, base);
  hi = std::min<uintptr_t>(hi, base + size);
  if (lo >= hi) return 0;
  const uint64_t first = (lo - base) / sum::kPiece, last = (hi - 1 - base) / sum::kPiece;
  return all_pieces((last + 1) * sum::kPiece) & ~all_pieces(first * sum::kPiece);
}
// Those it covers whole.
inline uint32_t pieces_covered(uintptr_t base, uint64_t size, uintptr_t lo, uintptr_t hi) {
  lo = std::max(lo, base);
  hi = std::min<uintptr_t>(hi, base + size);
  if (lo >= hi) return 0;
  const uint64_t first = (lo - base + sum::kPiece - 1) / sum::kPiece, end = (hi - base) / sum::kPiece;
  return end > first ? all_pieces(end * sum::kPiece) & ~all_pieces(first * sum::kPiece) : 0;
}

// Calls f(from, to) for each run of neighbouring pieces of `mask` in a chunk of `size`: the bytes
// [from, to) of the chunk, in order, while f returns true.
template <typename F>
void each_run(uint32_t mask, uint64_t size, F f) {
  mask &= all_pieces(size);
  for (unsigned k = 0; k < 32;) {
    if (!(mask >> k & 1)) {
      ++k;
      continue;
    }
    unsigned end = k;
    while (end < 32 && (mask >> end & 1)) ++end;
    if (!f(uint64_t{k} * sum::kPiece, std::min<uint64_t>(size, uint64_t{end} * sum::kPiece))) return;
    k = end;
  }
}

struct PieceUses {
  static constexpr size_t kMax = 256;
  uintptr_t chunk[kMax];
  uint32_t pieces[kMax];
  uint32_t n;
  bool overflow;
  void clear() { n = 0, overflow = false; }
  void add(uintptr_t c, uint32_t p) {
    for (uint32_t k = 0; k < n; ++k) {
      if (chunk[k] == c) {
        pieces[k] |= p;
        return;
      }
    }
    if (n == kMax) {
      overflow = true;
      return;
    }
    chunk[n] = c;
    pieces[n++] = p;
  }
  uint32_t of(uintptr_t c) const {
    if (overflow) return ~0u;
    for (uint32_t k = 0; k < n; ++k) {
      if (chunk[k] == c) return pieces[k];
    }
    return ~0u;
  }
};

}  // namespace gms::act::swap
