#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "policy/arena.h"

namespace gms::policy {
namespace {

constexpr uint64_t MiB = 1ull << 20;
using B = Arena::Backing;

// Chunks of 8 MiB, granules of 2 MiB: small numbers, the same rules as 64 and 2.
Arena make(uint64_t chunks) {
  Arena::Config c;
  c.chunk = 8 * MiB;
  c.granule = 2 * MiB;
  c.chunks = chunks;
  return Arena(c);
}

// Finds and takes; the offset, or ~0 when nothing fits.
uint64_t alloc(Arena& a, uint64_t bytes, bool device_only, Arena::Grant* g = nullptr) {
  Arena::Spot s = a.find(bytes, device_only);
  if (!s.ok) return ~0ull;
  Arena::Grant local;
  EXPECT_TRUE(a.take(s.offset, s.size, g ? g : &local));
  return s.offset;
}

// find() takes the chunks never taken or backed as one run without a look at their pieces; it must
// answer as a walk over every piece does, whatever happened before: random takes, frees (tagged or
// not), settles and backings over a slab with a long untouched tail. And a settled tag is gone
// from every chunk.
TEST(Arena, FindSkipsTheUntouchedTailWithTheSameAnswerAsAWalk) {
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    Arena a = make(64);
    uint32_t x = seed;
    auto next = [&](uint32_t n) {
      x = x * 1103515245u + 12345u;
      return (x >> 8) % n;
    };
    std::vector<uint64_t> live;
    Arena::Tag tag = 0;
    for (int op = 0; op < 800; ++op) {
      const uint64_t bytes = (1 + next(40)) * MiB;
      for (bool device_only : {false, true}) {
        const Arena::Spot s = a.find(bytes, device_only), w = a.find_by_walk(bytes, device_only);
        ASSERT_EQ(s.ok, w.ok) << "seed " << seed << " op " << op;
        ASSERT_EQ(s.offset, w.offset) << "seed " << seed << " op " << op;
        ASSERT_EQ(s.size, w.size);
        ASSERT_EQ(s.unbacked, w.unbacked);
      }
      switch (next(4)) {
        case 0:
        case 1: {
          const Arena::Spot s = a.find(bytes, next(3) == 0);
          Arena::Grant g;
          if (s.ok && a.take(s.offset, s.size, &g)) {
            live.push_back(s.offset);
            for (uint64_t c = a.first_chunk(s.offset); c <= a.last_chunk(s.offset, s.size); ++c) {
              if (a.backing(c) == B::none) a.set_backing(c, next(4) == 0 ? B::host : B::device);
            }
          }
          break;
        }
        case 2:
          if (!live.empty()) {
            const size_t k = next(static_cast<uint32_t>(live.size()));
            a.give(live[k], next(2) ? ++tag : 0);
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
          }
          break;
        default:
          if (tag) {
            // Settled, a free leaves its tag on no run: settle looks only in the chunks it freed.
            const Arena::Tag t = 1 + next(static_cast<uint32_t>(tag));
            a.settle(t);
            for (uint64_t c = 0; c < 64; ++c) {
              const std::vector<Arena::Tag> in = a.tags_in(c);
              ASSERT_EQ(std::count(in.begin(), in.end(), t), 0) << "seed " << seed << " op " << op << " chunk " << c;
            }
          }
          if (next(3) == 0) a.set_backing(next(64), static_cast<B>(next(3)));  // moves, releases, and a far chunk backed
          break;
      }
    }
  }
}

TEST(Arena, PacksAllocationsFromTheStartInGranules) {
  Arena a = make(4);
  Arena::Grant g;
  EXPECT_EQ(alloc(a, 3 * MiB, false, &g), 0u);
  EXPECT_EQ(a.size_of(0), 4 * MiB) << "rounded up to granules";
  EXPECT_EQ(g.woken, std::vector<uint64_t>{0});
  EXPECT_EQ(alloc(a, 1, false, &g), 4 * MiB);
  EXPECT_EQ(g.woken, std::vector<uint64_t>{}) << "chunk 0 already held something live";
  EXPECT_EQ(a.live_in(0), 6 * MiB);
  EXPECT_EQ(a.find(0, false).ok, false);
}

TEST(Arena, LiveGranulesAreThoseALiveAllocationCovers) {
  Arena a = make(3);
  const uint64_t x = alloc(a, 6 * MiB, false);  // granules 0-2 of chunk 0
  const uint64_t y = alloc(a, 6 * MiB, false);  // granule 3 of chunk 0, 0-1 of chunk 1
  const uint64_t z = alloc(a, 2 * MiB, false);  // granule 2 of chunk 1
  EXPECT_EQ(a.live_granules(0), 0b1111u);
  EXPECT_EQ(a.live_granules(1), 0b0111u) << "y reaches in from chunk 0";
  EXPECT_EQ(a.live_granules(2), 0u);
  ASSERT_TRUE(a.give(x, 0).ok);
  EXPECT_EQ(a.live_granules(0), 0b1000u) << "freed space holds nothing to move";
  ASSERT_TRUE(a.give(z, 0).ok);
  EXPECT_EQ(a.live_granules(1), 0b0011u);
  ASSERT_TRUE(a.give(y, 0).ok);
  EXPECT_EQ(a.live_granules(0) | a.live_granules(1), 0u);
}

TEST(Arena, DeviceOnlyFindsOnlyDeviceBackedSpace) {
  Arena a = make(4);
  EXPECT_FALSE(a.find(2 * MiB, true).ok) << "nothing is backed yet";
  Arena::Spot s = a.find(2 * MiB, false);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.unbacked, 1u);
  a.set_backing(2, B::device);
  s = a.find(2 * MiB, true);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.offset, 16 * MiB);
  EXPECT_EQ(s.unbacked, 0u);
  EXPECT_FALSE(a.find(10 * MiB, true).ok) << "only one chunk is on the device";
  a.set_backing(3, B::device);
  s = a.find(10 * MiB, true);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.offset, 16 * MiB) << "across the boundary of two device chunks";
}

TEST(Arena, PrefersSpaceThatNeedsNoBackingThenTheBestFit) {
  Arena a = make(8);
  a.set_backing(0, B::device);
  // With some of chunk 0 taken, 6 MiB are left on the device: a 4 MiB request goes there rather
  // than into a larger unbacked run.
  EXPECT_EQ(alloc(a, 2 * MiB, false), 0u);
  Arena::Spot s = a.find(4 * MiB, false);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.offset, 2 * MiB);
  EXPECT_EQ(s.unbacked, 0u);
  // 10 MiB cannot avoid backing a chunk; of the runs that can take it with one, the shortest.
  s = a.find(10 * MiB, false);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.unbacked, 1u);
  EXPECT_EQ(s.offset, 2 * MiB) << "6 MiB on the device, then 4 in chunk 1";
}

TEST(Arena, HostBackedChunksTakeNothingNew) {
  Arena a = make(3);
  EXPECT_EQ(alloc(a, 2 * MiB, false), 0u);
  a.set_backing(0, B::host);  // evicted with its live allocation
  Arena::Spot s = a.find(2 * MiB, false);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.offset, 8 * MiB) << "not in chunk 0's free 6 MiB";
  EXPECT_FALSE(a.find(20 * MiB, false).ok) << "chunks 1 and 2 hold only 16 MiB";
}

TEST(Arena, LargeAllocationsStartOnAChunkBoundaryWhenTheyCan) {
  Arena a = make(4);
  EXPECT_EQ(alloc(a, 2 * MiB, false), 0u);
  EXPECT_EQ(alloc(a, 8 * MiB, false), 8 * MiB) << "one chunk, not two halves";
  EXPECT_EQ(alloc(a, 2 * MiB, false), 2 * MiB) << "small ones still fill the gap";
  // Only 4 chunks: 10 MiB must start unaligned to fit at all (chunk 0's 4 MiB and chunk 2).
  Arena b = make(2);
  EXPECT_EQ(alloc(b, 4 * MiB, false), 0u);
  EXPECT_EQ(alloc(b, 12 * MiB, false), 4 * MiB);
}

TEST(Arena, FreedSpaceMergesAndIsHandedOutForAnySizeThatFits) {
  Arena a = make(2);
  a.set_backing(0, B::device);
  a.set_backing(1, B::device);
  uint64_t x = alloc(a, 6 * MiB, true), y = alloc(a, 4 * MiB, true), z = alloc(a, 6 * MiB, true);
  EXPECT_EQ(x, 0u);
  EXPECT_EQ(z, 10 * MiB);
  EXPECT_FALSE(a.find(2 * MiB, true).ok);
  EXPECT_TRUE(a.give(x, 0).ok);
  EXPECT_TRUE(a.give(y, 0).ok);
  EXPECT_FALSE(a.give(y, 0).ok) << "freed twice";
  EXPECT_FALSE(a.give(1 * MiB, 0).ok) << "not the start of an allocation";
  Arena::Spot s = a.find(10 * MiB, true);
  ASSERT_TRUE(s.ok) << "x and y merged";
  EXPECT_EQ(s.offset, 0u);
  EXPECT_EQ(alloc(a, 2 * MiB, true), 0u);
}

TEST(Arena, ChunksDieWhenTheirLastAllocationGoesAndWakeWithTheNext) {
  Arena a = make(3);
  uint64_t x = alloc(a, 12 * MiB, false);  // chunks 0 and 1
  uint64_t y = alloc(a, 2 * MiB, false);   // chunk 1
  Arena::Freed f = a.give(x, 0);
  EXPECT_EQ(f.dead, std::vector<uint64_t>{0});
  EXPECT_EQ(f.size, 12 * MiB);
  f = a.give(y, 0);
  EXPECT_EQ(f.dead, std::vector<uint64_t>{1});
  EXPECT_TRUE(a.empty());
  Arena::Grant g;
  alloc(a, 16 * MiB, false, &g);
  EXPECT_EQ(g.woken, (std::vector<uint64_t>{0, 1}));
}

TEST(Arena, TheUseOfFreedSpaceWaitsForTheFreesItCovers) {
  Arena a = make(2);
  a.set_backing(0, B::device);
  a.set_backing(1, B::device);
  uint64_t x = alloc(a, 4 * MiB, true), y = alloc(a, 4 * MiB, true), z = alloc(a, 8 * MiB, true);
  a.give(x, 11);
  a.give(y, 12);  // merges with x's space: both tags
  EXPECT_EQ(a.tags_in(0), (std::vector<Arena::Tag>{11, 12}));
  EXPECT_TRUE(a.tags_in(1).empty());
  Arena::Grant g;
  ASSERT_TRUE(a.take(0, 2 * MiB, &g));
  EXPECT_EQ(g.waits, (std::vector<Arena::Tag>{11, 12})) << "merged space is as unsettled as its parts";
  EXPECT_TRUE(g.dropped.empty()) << "the rest of the space still carries them";
  ASSERT_TRUE(a.take(2 * MiB, 6 * MiB, &g));
  EXPECT_EQ(g.dropped, (std::vector<Arena::Tag>{11, 12}));
  // A settled free leaves nothing to wait for.
  a.give(z, 13);
  a.settle(13);
  EXPECT_TRUE(a.tags_in(1).empty());
  ASSERT_TRUE(a.take(8 * MiB, 8 * MiB, &g));
  EXPECT_TRUE(g.waits.empty());
}

TEST(Arena, AChunksSpaceWaitsOnlyForTheFreesInIt) {
  // Neighbouring chunks freed at different times: the older one's memory can go back once its own
  // free is over, without waiting for the newer one's.
  Arena a = make(2);
  uint64_t x = alloc(a, 8 * MiB, false), y = alloc(a, 8 * MiB, false);
  a.give(x, 1);
  a.give(y, 2);
  EXPECT_EQ(a.tags_in(0), std::vector<Arena::Tag>{1});
  EXPECT_EQ(a.tags_in(1), std::vector<Arena::Tag>{2});
  // Space across both still goes out as one run, waiting for both.
  Arena::Grant g;
  EXPECT_EQ(alloc(a, 12 * MiB, false, &g), 0u);
  EXPECT_EQ(g.waits, (std::vector<Arena::Tag>{1, 2}));
  EXPECT_EQ(g.dropped, std::vector<Arena::Tag>{1}) << "the rest of chunk 1 still carries 2";
  EXPECT_EQ(a.tags_in(1), std::vector<Arena::Tag>{2});
  // An allocation across the boundary, freed, leaves its tag in both chunks.
  a.give(0, 3);
  EXPECT_EQ(a.tags_in(0), std::vector<Arena::Tag>{3});
  EXPECT_EQ(a.tags_in(1), (std::vector<Arena::Tag>{3, 2}));
}

TEST(Arena, TakeRefusesSpaceThatIsNotFree) {
  Arena a = make(2);
  Arena::Grant g;
  ASSERT_TRUE(a.take(4 * MiB, 4 * MiB, &g));
  EXPECT_FALSE(a.take(2 * MiB, 4 * MiB, &g)) << "overlaps a live allocation";
  EXPECT_FALSE(a.take(1 * MiB, 2 * MiB, &g)) << "not on a granule";
  EXPECT_FALSE(a.take(14 * MiB, 4 * MiB, &g)) << "past the slab";
  EXPECT_FALSE(a.take(0, 0, &g));
}

TEST(Arena, EverythingFreedIsOneRunAgain) {
  Arena a = make(4);
  std::vector<uint64_t> got;
  for (int i = 0; i < 16; ++i) got.push_back(alloc(a, 2 * MiB, false));
  EXPECT_FALSE(a.find(2 * MiB, false).ok);
  // Freed in an order that merges on both sides.
  for (int i : {1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14}) a.give(got[i], static_cast<Arena::Tag>(i + 1));
  EXPECT_TRUE(a.empty());
  Arena::Grant g;
  EXPECT_EQ(alloc(a, 32 * MiB, false, &g), 0u);
  EXPECT_EQ(g.waits.size(), 16u);
  EXPECT_EQ(g.dropped.size(), 16u);
}

}  // namespace
}  // namespace gms::policy
