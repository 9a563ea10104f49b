// The 2 MiB pieces of movable chunks a launch uses (act/piece_uses.h): which pieces a range
// touches and which it covers whole, and the per-launch list the scan fills.
#include "act/piece_uses.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace {

using namespace gms::act::swap;
constexpr uint64_t MiB = 1ull << 20;
constexpr uintptr_t kChunk = 0x7f0000000000;  // a 64 MiB chunk's base

TEST(PieceUses, AllPiecesOfEveryChunkSize) {
  EXPECT_EQ(all_pieces(2 * MiB), 0x1u);
  EXPECT_EQ(all_pieces(4 * MiB), 0x3u);
  EXPECT_EQ(all_pieces(64 * MiB), ~0u);
}

TEST(PieceUses, TouchedAreThePiecesARangeOverlaps) {
  const uint64_t size = 64 * MiB;
  EXPECT_EQ(pieces_touched(kChunk, size, kChunk, kChunk + 1), 0x1u);
  EXPECT_EQ(pieces_touched(kChunk, size, kChunk + 2 * MiB - 1, kChunk + 2 * MiB + 1), 0x3u);
  EXPECT_EQ(pieces_touched(kChunk, size, kChunk + 4 * MiB, kChunk + 6 * MiB), 0x4u);
  // An allocation that starts before the chunk and ends inside it, or runs past it.
  EXPECT_EQ(pieces_touched(kChunk, size, kChunk - 8 * MiB, kChunk + 3 * MiB), 0x3u);
  EXPECT_EQ(pieces_touched(kChunk, size, kChunk + 62 * MiB, kChunk + 200 * MiB), 0x80000000u);
  EXPECT_EQ(pieces_touched(kChunk, size, kChunk - 8 * MiB, kChunk + 200 * MiB), ~0u);
  EXPECT_EQ(pieces_touched(kChunk, size, kChunk + size, kChunk + size + MiB), 0u);
}

TEST(PieceUses, CoveredArePiecesWhollyInside) {
  const uint64_t size = 64 * MiB;
  EXPECT_EQ(pieces_covered(kChunk, size, kChunk, kChunk + 2 * MiB), 0x1u);
  EXPECT_EQ(pieces_covered(kChunk, size, kChunk, kChunk + 2 * MiB - 1), 0u);  // shares its piece
  EXPECT_EQ(pieces_covered(kChunk, size, kChunk + 1, kChunk + 6 * MiB), 0x6u);
  EXPECT_EQ(pieces_covered(kChunk, size, kChunk - MiB, kChunk + 200 * MiB), ~0u);
  // Every covered piece is touched.
  for (uint64_t lo = 0; lo < size; lo += 3 * MiB / 2) {
    for (uint64_t hi = lo + MiB; hi <= size; hi += 5 * MiB / 2) {
      const uint32_t t = pieces_touched(kChunk, size, kChunk + lo, kChunk + hi);
      EXPECT_EQ(pieces_covered(kChunk, size, kChunk + lo, kChunk + hi) & ~t, 0u);
    }
  }
}

TEST(PieceUses, RunsOfNeighbouringPiecesInOrderUntilTheCallerStops) {
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  auto all = [&](uint64_t from, uint64_t to) {
    runs.push_back({from, to});
    return true;
  };
  each_run(0x8000000Du, 64 * MiB, all);  // pieces 0, 2-3, 31
  EXPECT_EQ(runs, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 2 * MiB}, {4 * MiB, 8 * MiB}, {62 * MiB, 64 * MiB}}));
  runs.clear();
  each_run(~0u, 4 * MiB, all);  // only the chunk's own pieces
  EXPECT_EQ(runs, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 4 * MiB}}));
  runs.clear();
  each_run(0x5u, 64 * MiB, [&](uint64_t from, uint64_t to) {
    runs.push_back({from, to});
    return false;
  });
  EXPECT_EQ(runs.size(), 1u);
}

TEST(PieceUses, ListJoinsAChunksPiecesAndCountsAnOverflowAsWhole) {
  static PieceUses u;  // as in thread-local storage: trivially constructed, then cleared
  u.clear();
  EXPECT_EQ(u.of(kChunk), ~0u);  // not gathered: used whole
  u.add(kChunk, 0x1);
  u.add(kChunk, 0x4);
  u.add(kChunk + 64 * MiB, 0x2);
  EXPECT_EQ(u.of(kChunk), 0x5u);
  EXPECT_EQ(u.of(kChunk + 64 * MiB), 0x2u);
  for (size_t k = 0; k < PieceUses::kMax; ++k) u.add(kChunk + (k + 2) * 64 * MiB, 0x1);
  EXPECT_EQ(u.of(kChunk), ~0u);  // past the list: every chunk counts whole
  u.clear();
  EXPECT_EQ(u.of(kChunk), ~0u);
  u.add(kChunk, 0x8);
  EXPECT_EQ(u.of(kChunk), 0x8u);
}

}  // namespace
