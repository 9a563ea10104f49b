#include <gtest/gtest.h>

#include <vector>

#include "policy/host_pool.h"

namespace gms::policy {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kBase = 0x7f0000000000ull;

HostPool make(uint64_t bound, uint64_t span = 0) {
  HostPool::Config c;
  c.base = kBase;
  c.span = span ? span : 2 * bound;
  c.bound = bound;
  return HostPool(c);
}

TEST(HostPool, OwnsExactlyItsReservation) {
  HostPool p = make(64 * MiB);
  EXPECT_TRUE(p.owns(kBase));
  EXPECT_TRUE(p.owns(kBase + 128 * MiB - 1));
  EXPECT_FALSE(p.owns(kBase + 128 * MiB));
  EXPECT_FALSE(p.owns(kBase - 1));
  EXPECT_FALSE(p.owns(0));
  HostPool none = make(0, 0);
  EXPECT_FALSE(none.owns(0)) << "an empty reservation owns nothing, address 0 included";
  EXPECT_FALSE(none.owns(kBase));
}

TEST(HostPool, NewBlocksArePageMultiplesAndFresh) {
  HostPool p = make(64 * MiB);
  auto g = p.acquire(40 * MiB + 1);
  ASSERT_NE(g.addr, 0u);
  EXPECT_EQ(g.size, 40 * MiB + 4 * KiB);
  EXPECT_TRUE(g.fresh);
  EXPECT_TRUE(g.released.empty());
  EXPECT_EQ(p.live_size(g.addr), g.size);
  EXPECT_EQ(p.live_size(g.addr + 4 * KiB), 0u) << "only a block's start is a block";
  EXPECT_EQ(p.live_bytes(), g.size);
}

TEST(HostPool, AGranuleKeepsEveryBlockAligned) {
  HostPool::Config c;
  c.base = kBase;
  c.span = 256 * MiB;
  c.bound = 128 * MiB;
  c.granule = 2 * MiB;
  HostPool p(c);
  for (uint64_t n : {uint64_t{1 * MiB}, uint64_t{40'000'000}, uint64_t{3 * MiB + 1}, uint64_t{2 * MiB}}) {
    auto g = p.acquire(n);
    ASSERT_NE(g.addr, 0u) << n;
    EXPECT_EQ(g.addr % (2 * MiB), 0u) << n;
    EXPECT_EQ(g.size % (2 * MiB), 0u) << n;
    EXPECT_GE(g.size, n);
    EXPECT_LT(g.size, n + 2 * MiB);
  }
}

TEST(HostPool, AFreedBlockServesTheSameSizeAgainWithItsTag) {
  HostPool p = make(256 * MiB);
  auto a = p.acquire(40 * MiB);
  p.set_tag(a.addr, 77);
  ASSERT_TRUE(p.release(a.addr));
  EXPECT_EQ(p.live_size(a.addr), 0u);
  EXPECT_EQ(p.cached_bytes(), 40 * MiB);
  auto b = p.acquire(40 * MiB);
  EXPECT_EQ(b.addr, a.addr);
  EXPECT_FALSE(b.fresh) << "its pages hold the last owner's data: calloc must clear them";
  EXPECT_EQ(b.tag, 77u) << "the block keeps its serial, so its registration is found again";
  EXPECT_EQ(p.cached_bytes(), 0u);
}

TEST(HostPool, OfBlocksOfOneSizeTheLastFreedServesFirst) {
  HostPool p = make(256 * MiB);
  auto a = p.acquire(40 * MiB);
  auto b = p.acquire(40 * MiB);
  auto c = p.acquire(40 * MiB);
  p.release(a.addr);
  p.release(c.addr);
  p.release(b.addr);
  EXPECT_EQ(p.acquire(40 * MiB).addr, b.addr);
  EXPECT_EQ(p.acquire(40 * MiB).addr, c.addr);
  auto again = p.acquire(40 * MiB);
  EXPECT_EQ(again.addr, a.addr);
  // A loop that frees its buffer and makes another gets the same block back each time, with
  // other blocks of the size cached from before.
  p.release(b.addr);
  p.release(c.addr);
  for (int i = 0; i < 3; ++i) {
    p.release(again.addr);
    again = p.acquire(40 * MiB);
    EXPECT_EQ(again.addr, a.addr) << i;
  }
}

TEST(HostPool, ReleaseOfUnknownOrCachedAddressesFails) {
  HostPool p = make(64 * MiB);
  auto a = p.acquire(2 * MiB);
  EXPECT_FALSE(p.release(a.addr + 4 * KiB));
  EXPECT_TRUE(p.release(a.addr));
  EXPECT_FALSE(p.release(a.addr)) << "a double free is not a second release";
}

TEST(HostPool, ADiscardedBlockIsFreeSpaceAgain) {
  HostPool p = make(64 * MiB, 8 * MiB);
  auto a = p.acquire(8 * MiB);
  p.discard(a.addr);
  EXPECT_EQ(p.live_bytes(), 0u);
  EXPECT_EQ(p.cached_bytes(), 0u) << "never cached: its memory was never mapped";
  auto b = p.acquire(8 * MiB);
  EXPECT_EQ(b.addr, a.addr);
  EXPECT_TRUE(b.fresh);
}

TEST(HostPool, SmallestCachedBlockWithinTheSlackIsChosen) {
  HostPool p = make(1024 * MiB);
  auto big = p.acquire(100 * MiB);
  auto mid = p.acquire(44 * MiB);
  auto exact = p.acquire(41 * MiB);
  p.release(big.addr);
  p.release(mid.addr);
  p.release(exact.addr);
  auto g = p.acquire(40 * MiB);
  EXPECT_EQ(g.addr, exact.addr) << "41 MiB is the best fit for 40";
  auto h = p.acquire(40 * MiB);
  EXPECT_EQ(h.addr, mid.addr) << "44 MiB is within a quarter of 40";
  auto k = p.acquire(40 * MiB);
  EXPECT_NE(k.addr, big.addr) << "100 MiB is too wasteful for 40: a new block";
  EXPECT_TRUE(k.fresh);
}

TEST(HostPool, TheBoundGivesBackLeastRecentlyFreedBlocksFirst) {
  HostPool p = make(100 * MiB, 1024 * MiB);
  auto a = p.acquire(30 * MiB);
  auto b = p.acquire(30 * MiB);
  auto c = p.acquire(30 * MiB);
  p.release(b.addr);
  p.release(a.addr);
  p.release(c.addr);  // freed order: b, a, c
  auto g = p.acquire(60 * MiB);  // 90 cached + 60 > 100: b, then a, leave
  ASSERT_NE(g.addr, 0u);
  ASSERT_EQ(g.released.size(), 2u);
  EXPECT_EQ(g.released[0], (AddrRange{b.addr, b.addr + 30 * MiB}));
  EXPECT_EQ(g.released[1], (AddrRange{a.addr, a.addr + 30 * MiB}));
  EXPECT_EQ(p.cached_bytes(), 30 * MiB);
  EXPECT_LE(p.live_bytes() + p.cached_bytes(), 100 * MiB);
}

TEST(HostPool, LiveBlocksAloneOverTheBoundAreRefusedWithoutEvicting) {
  HostPool p = make(100 * MiB);
  auto a = p.acquire(70 * MiB);
  auto b = p.acquire(20 * MiB);
  p.release(b.addr);
  auto g = p.acquire(40 * MiB);
  EXPECT_EQ(g.addr, 0u) << "70 live + 40 > 100: the ordinary allocator serves it";
  EXPECT_TRUE(g.released.empty()) << "nothing given back for a refusal";
  EXPECT_EQ(p.cached_bytes(), 20 * MiB);
  EXPECT_EQ(p.acquire(101 * MiB).addr, 0u);
  EXPECT_EQ(p.acquire(0).addr, 0u);
  (void)a;
}

TEST(HostPool, GivenBackSpaceMergesSoALargerBlockFits) {
  // The span holds exactly three 10 MiB blocks; the bound is not the limit here.
  HostPool p = make(1024 * MiB, 30 * MiB);
  auto a = p.acquire(10 * MiB);
  auto b = p.acquire(10 * MiB);
  auto c = p.acquire(10 * MiB);
  EXPECT_EQ(p.acquire(4 * KiB).addr, 0u) << "the reservation is full";
  p.release(a.addr);
  p.release(b.addr);
  auto g = p.acquire(20 * MiB);
  ASSERT_EQ(g.addr, a.addr) << "a and b merged into one 20 MiB range";
  EXPECT_EQ(g.released.size(), 2u);
  p.release(c.addr);
  p.release(g.addr);
  auto all = p.acquire(30 * MiB);
  EXPECT_EQ(all.addr, kBase) << "everything merged back into the whole span";
  EXPECT_EQ(all.released.size(), 2u);
  EXPECT_EQ(p.cached_bytes(), 0u);
}

TEST(HostPool, ManyCyclesOfMixedSizesKeepTheAccounting) {
  HostPool p = make(256 * MiB, 512 * MiB);
  std::vector<uint64_t> live;
  uint64_t seed = 12345;
  for (int i = 0; i < 5000; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t size = (1 + (seed >> 33) % 48) * MiB;
    if (live.size() > 6 || (seed & 1)) {
      if (!live.empty()) {
        size_t k = (seed >> 20) % live.size();
        ASSERT_TRUE(p.release(live[k]));
        live.erase(live.begin() + static_cast<long>(k));
      }
    } else {
      auto g = p.acquire(size);
      if (g.addr) {
        ASSERT_TRUE(p.owns(g.addr));
        ASSERT_TRUE(p.owns(g.addr + g.size - 1));
        for (uint64_t a : live) {
          uint64_t s = p.live_size(a);
          ASSERT_TRUE(g.addr + g.size <= a || a + s <= g.addr) << "live blocks never overlap";
        }
        live.push_back(g.addr);
      }
    }
    ASSERT_LE(p.live_bytes() + p.cached_bytes(), 256 * MiB);
  }
}

}  // namespace
}  // namespace gms::policy
