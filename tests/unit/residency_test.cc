#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <vector>

#include "policy/residency.h"

namespace gms::policy {

// Readable failures.
void PrintTo(const Action& a, std::ostream* os) {
  static const char* const kinds[] = {"prefetch", "evict", "remote"};
  *os << kinds[static_cast<int>(a.kind)] << "(" << a.region << ", " << a.offset << ", " << a.bytes << ")";
}

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

Action pf(RegionId id, uint64_t offset, uint64_t bytes) { return {ActionKind::prefetch_to_device, id, offset, bytes}; }
Action ev(RegionId id, uint64_t offset, uint64_t bytes) { return {ActionKind::evict_to_host, id, offset, bytes}; }
Action remote(RegionId id, uint64_t size) { return {ActionKind::stay_remote, id, 0, size}; }
using Actions = std::vector<Action>;

ResidencyConfig small_chunks(uint32_t limit = 3, uint64_t window = 64) {
  ResidencyConfig c;
  c.chunk_bytes = 2 * MiB;
  c.pingpong_limit = limit;
  c.pingpong_window = window;
  return c;
}

// ---- basics ----------------------------------------------------------------------------------

TEST(Residency, NewRegionStartsOnHost) {
  ResidencyPlanner p;
  p.add_region(1, 10 * MiB);
  EXPECT_EQ(p.resident_bytes(), 0u);
  EXPECT_EQ(p.resident_bytes(1), 0u);
  EXPECT_FALSE(p.stays_remote(1));
}

TEST(Residency, RegionMadeOnTheDeviceIsResidentAndTheNewestToEvict) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB, /*resident=*/4 * MiB);
  EXPECT_EQ(p.resident_bytes(), 4 * MiB);
  EXPECT_EQ(p.resident_bytes(1), 4 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), Actions{}) << "nothing to move: it is there";
  p.add_region(2, 4 * MiB);
  p.plan_launch({2}, 8 * MiB);
  p.add_region(3, 4 * MiB, /*resident=*/4 * MiB);  // made after 1 and 2 were used: the newest
  // Over the budget now (12 MiB resident in 8): the least recently used, 1, goes, and only it.
  EXPECT_EQ(p.plan_launch({}, 8 * MiB), (Actions{ev(1, 0, 4 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 8 * MiB);
  p.remove_region(3);
  EXPECT_EQ(p.resident_bytes(), 4 * MiB) << "its resident bytes leave with it";
}

TEST(Residency, StreamedRegionComesInOnlyIntoFreeRoom) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB, /*resident=*/4 * MiB);
  p.add_region(2, 4 * MiB, /*resident=*/4 * MiB);
  p.add_region(3, 4 * MiB);
  p.set_streamed(3, true);
  EXPECT_EQ(p.plan_launch({3}, 8 * MiB), Actions{}) << "the budget is full: read where it lies, evict nothing";
  EXPECT_EQ(p.resident_bytes(), 8 * MiB);
  EXPECT_FALSE(p.stays_remote(3)) << "not stopped: it may come in later";
  p.remove_region(2);
  EXPECT_EQ(p.plan_launch({3}, 8 * MiB), (Actions{pf(3, 0, 4 * MiB)})) << "free room now";
  p.add_region(4, 4 * MiB);
  EXPECT_EQ(p.plan_launch({4}, 8 * MiB), (Actions{ev(1, 0, 4 * MiB), pf(4, 0, 4 * MiB)}))
      << "a region not streamed still makes room";
}

TEST(Residency, RegionMadeOnTheDeviceBeforeAnyLaunchCanBeEvicted) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 6 * MiB, /*resident=*/6 * MiB);
  p.add_region(2, 4 * MiB);
  EXPECT_EQ(p.plan_launch({2}, 8 * MiB), (Actions{ev(1, 4 * MiB, 2 * MiB), pf(2, 0, 4 * MiB)}));
}

TEST(Residency, RegionMadePartlyOnTheDeviceKeepsWholeChunksOfItsPrefix) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 7 * MiB, /*resident=*/5 * MiB);  // reused memory: chunks 0 and 1 there, 2 and 3 not
  EXPECT_EQ(p.resident_bytes(1), 4 * MiB) << "a part of a chunk is not resident";
  EXPECT_EQ(p.plan_launch({1}, 100 * MiB), (Actions{pf(1, 4 * MiB, 3 * MiB)})) << "only the missing tail";
  p.add_region(2, 3 * MiB, /*resident=*/3 * MiB);
  EXPECT_EQ(p.resident_bytes(2), 3 * MiB) << "all of it, the short last chunk included";
  EXPECT_EQ(p.resident_bytes(), 10 * MiB);
}

TEST(Residency, RoomForANewRegionEvictsTheLeastRecentlyUsedJustEnough) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB);
  p.add_region(2, 4 * MiB);
  p.plan_launch({1}, 8 * MiB);
  p.plan_launch({2}, 8 * MiB);
  EXPECT_EQ(p.plan_room(2 * MiB, 12 * MiB), Actions{}) << "it fits";
  EXPECT_EQ(p.plan_room(3 * MiB, 10 * MiB), (Actions{ev(1, 2 * MiB, 2 * MiB)})) << "1 is older: its last chunk is enough";
  EXPECT_EQ(p.resident_bytes(), 6 * MiB) << "the planner counts the eviction as done, not the new bytes";
  EXPECT_EQ(p.plan_room(7 * MiB, 8 * MiB), (Actions{ev(1, 0, 2 * MiB), ev(2, 0, 4 * MiB)}))
      << "no region is spared, not even the last launch's";
  EXPECT_EQ(p.plan_room(9 * MiB, 8 * MiB), Actions{}) << "larger than the budget: nothing moves for it";
  EXPECT_EQ(p.resident_bytes(), 0u);
  EXPECT_EQ(p.stats().evicted_bytes, 8 * MiB);
}

TEST(Residency, SparedRegionsAreEvictedOnlyWhenTheOthersAreNotEnough) {
  ResidencyPlanner p(small_chunks());
  for (RegionId id : {1, 2, 3}) {
    p.add_region(id, 4 * MiB);
    p.plan_launch({id}, 12 * MiB);  // 1 is the least recently used, 3 the most
  }
  p.set_spared(1, true);
  p.set_spared(99, true);  // unknown: ignored
  EXPECT_EQ(p.plan_room(2 * MiB, 12 * MiB), (Actions{ev(2, 2 * MiB, 2 * MiB)})) << "2 is the oldest not spared";
  EXPECT_EQ(p.plan_launch({3}, 6 * MiB), (Actions{ev(2, 0, 2 * MiB), ev(1, 2 * MiB, 2 * MiB)}))
      << "3 is referenced and 2 is not enough: then 1, spared, from its end";
  p.set_spared(1, false);
  EXPECT_EQ(p.plan_room(2 * MiB, 6 * MiB), (Actions{ev(1, 0, 2 * MiB)})) << "no longer spared: the oldest again";
  EXPECT_EQ(p.resident_bytes(), 4 * MiB);
}

TEST(Residency, IdleLaunchesCountFromTheLastReferenceOrFromTheAdd) {
  ResidencyPlanner p(small_chunks());
  EXPECT_EQ(p.idle_launches(1), 0u) << "unknown";
  p.add_region(1, 2 * MiB);
  p.plan_launch({1}, 8 * MiB);
  p.add_region(2, 2 * MiB, 2 * MiB);
  EXPECT_EQ(p.idle_launches(1), 0u);
  EXPECT_EQ(p.idle_launches(2), 0u);
  for (int i = 0; i < 5; ++i) p.plan_launch({2}, 8 * MiB);
  EXPECT_EQ(p.idle_launches(1), 5u);
  EXPECT_EQ(p.idle_launches(2), 0u);
  p.add_region(3, 2 * MiB);
  p.plan_launch({1}, 8 * MiB);
  EXPECT_EQ(p.idle_launches(1), 0u);
  EXPECT_EQ(p.idle_launches(3), 1u) << "never referenced: counted from its add";
  ResidencyPlanner q(small_chunks());
  q.add_region(1, 2 * MiB, 2 * MiB);
  EXPECT_EQ(q.idle_launches(1), 0u) << "made on the device before any launch";
}

TEST(Residency, PrefetchesReferencedRegionOnce) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 10 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 100 * MiB), (Actions{pf(1, 0, 10 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 10 * MiB);
  EXPECT_EQ(p.resident_bytes(1), 10 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 100 * MiB), Actions{}) << "already resident";
  EXPECT_EQ(p.stats().prefetched_bytes, 10 * MiB);
  EXPECT_EQ(p.launches(), 2u);
}

TEST(Residency, EmptyLaunchWithRoomDoesNothing) {
  ResidencyPlanner p;
  p.add_region(1, 10 * MiB);
  EXPECT_EQ(p.plan_launch({}, 100 * MiB), Actions{});
  EXPECT_EQ(p.plan_launch({1}, 100 * MiB).size(), 1u);
  EXPECT_EQ(p.plan_launch({}, 100 * MiB), Actions{}) << "resident and within budget: nothing to evict";
  EXPECT_EQ(p.resident_bytes(), 10 * MiB);
}

TEST(Residency, UnknownAndDuplicateIdsInReferenced) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB);
  EXPECT_EQ(p.plan_launch({7, 1, 1, 9, 1}, 100 * MiB), (Actions{pf(1, 0, 4 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 4 * MiB);
  EXPECT_EQ(p.plan_launch({7, 9}, 100 * MiB), Actions{});
}

TEST(Residency, ZeroSizedRegionNeedsNothing) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 0);
  EXPECT_EQ(p.plan_launch({1}, 0), Actions{});
  EXPECT_EQ(p.plan_launch({1}, 10 * MiB), Actions{});
  EXPECT_EQ(p.stats().too_large, 0u);
}

TEST(Residency, ChunkSizeIsClampedAndRounded) {
  auto chunk = [](uint64_t bytes) {
    ResidencyConfig c;
    c.chunk_bytes = bytes;
    return ResidencyPlanner(c).config().chunk_bytes;
  };
  EXPECT_EQ(chunk(64 * MiB), 64 * MiB);
  EXPECT_EQ(chunk(2 * MiB), 2 * MiB);
  EXPECT_EQ(chunk(0), 2 * MiB);
  EXPECT_EQ(chunk(1 * MiB), 2 * MiB);
  EXPECT_EQ(chunk(128 * MiB), 64 * MiB);
  EXPECT_EQ(chunk(5 * MiB), 4 * MiB);
  EXPECT_EQ(ResidencyPlanner().config().chunk_bytes, 64 * MiB) << "default";
}

// ---- budget edges ----------------------------------------------------------------------------

TEST(Residency, RegionsExactlyFillingTheBudgetAreAllPrefetched) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB);
  p.add_region(2, 6 * MiB);
  EXPECT_EQ(p.plan_launch({1, 2}, 10 * MiB), (Actions{pf(1, 0, 4 * MiB), pf(2, 0, 6 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 10 * MiB);
}

TEST(Residency, OneByteOverLeavesTheLastRegionRemoteWithoutANote) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB);
  p.add_region(2, 6 * MiB);
  EXPECT_EQ(p.plan_launch({1, 2}, 10 * MiB - 1), (Actions{pf(1, 0, 4 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 4 * MiB);
  EXPECT_FALSE(p.stays_remote(2));
  EXPECT_EQ(p.stats().too_large, 0u);
}

TEST(Residency, RegionOfExactlyTheBudgetIsPrefetched) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 10 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 10 * MiB), (Actions{pf(1, 0, 10 * MiB)}));
  EXPECT_EQ(p.stats().too_large, 0u);
}

TEST(Residency, RegionOneByteOverTheWholeBudgetStaysRemoteNotedOnce) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 10 * MiB + 1);
  EXPECT_EQ(p.plan_launch({1}, 10 * MiB), (Actions{remote(1, 10 * MiB + 1)}));
  EXPECT_TRUE(p.stays_remote(1));
  EXPECT_EQ(p.stats().too_large, 1u);
  EXPECT_EQ(p.plan_launch({1}, 10 * MiB), Actions{}) << "noted only the first time";
  EXPECT_EQ(p.plan_launch({1}, 5 * MiB), Actions{});
  EXPECT_EQ(p.stats().too_large, 1u);
  EXPECT_EQ(p.resident_bytes(), 0u);
  EXPECT_EQ(p.stats().prefetched_bytes, 0u);
}

TEST(Residency, TooLargeRegionDoesNotStopTheRestOfTheLaunch) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 64 * MiB);
  p.add_region(2, 8 * MiB);
  p.add_region(3, 2 * MiB);
  EXPECT_EQ(p.plan_launch({1, 2, 3}, 16 * MiB),
            (Actions{pf(2, 0, 8 * MiB), pf(3, 0, 2 * MiB), remote(1, 64 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 10 * MiB);
}

TEST(Residency, TooLargeRegionIsPrefetchedWhenTheBudgetGrowsAndNotedAgainLater) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 12 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 10 * MiB), (Actions{remote(1, 12 * MiB)}));
  EXPECT_EQ(p.plan_launch({1}, 12 * MiB), (Actions{pf(1, 0, 12 * MiB)}));
  EXPECT_FALSE(p.stays_remote(1));
  EXPECT_EQ(p.plan_launch({1}, 4 * MiB), Actions{}) << "resident: referenced chunks are never evicted";
  EXPECT_EQ(p.plan_launch({}, 4 * MiB), (Actions{ev(1, 4 * MiB, 8 * MiB)}));
  EXPECT_EQ(p.plan_launch({1}, 4 * MiB), (Actions{remote(1, 12 * MiB)}));
  EXPECT_TRUE(p.stays_remote(1));
  EXPECT_EQ(p.stats().too_large, 2u);
  EXPECT_EQ(p.resident_bytes(1), 4 * MiB) << "its resident start stays";
}

TEST(Residency, ZeroBudgetEvictsEverythingNotReferenced) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB);
  p.add_region(2, 4 * MiB);
  p.plan_launch({1, 2}, 8 * MiB);
  EXPECT_EQ(p.plan_launch({}, 0), (Actions{ev(1, 0, 4 * MiB), ev(2, 0, 4 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 0u);
}

// ---- referenced regions together over the budget ------------------------------------------------

TEST(Residency, OverBudgetLaunchPrefetchesWholeRegionsInArgumentOrder) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 6 * MiB);
  p.add_region(2, 6 * MiB);
  p.add_region(3, 4 * MiB);
  EXPECT_EQ(p.plan_launch({1, 2, 3}, 10 * MiB), (Actions{pf(1, 0, 6 * MiB), pf(3, 0, 4 * MiB)}))
      << "2 does not fit after 1; 3 still does";
  EXPECT_EQ(p.resident_bytes(2), 0u);
  EXPECT_EQ(p.stats().too_large, 0u);
}

TEST(Residency, ArgumentOrderDecidesWhichRegionGetsTheRoom) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 6 * MiB);
  p.add_region(2, 6 * MiB);
  EXPECT_EQ(p.plan_launch({2, 1}, 10 * MiB), (Actions{pf(2, 0, 6 * MiB)}));
}

TEST(Residency, NeverEvictsOneReferencedRegionForAnother) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 6 * MiB);
  p.add_region(2, 6 * MiB);
  p.plan_launch({1}, 10 * MiB);
  EXPECT_EQ(p.plan_launch({2, 1}, 10 * MiB), Actions{})
      << "1 is resident and referenced: it stays, and 2 has no room";
  EXPECT_EQ(p.resident_bytes(1), 6 * MiB);
  EXPECT_EQ(p.stats().evicted_bytes, 0u);
}

TEST(Residency, PartlyResidentReferencedRegionKeepsItsChunksWhenItCannotBeCompleted) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 8 * MiB);
  p.add_region(2, 4 * MiB);
  p.plan_launch({1}, 8 * MiB);
  EXPECT_EQ(p.plan_launch({2}, 8 * MiB), (Actions{ev(1, 4 * MiB, 4 * MiB), pf(2, 0, 4 * MiB)}));
  // Both referenced: neither may be evicted, so 1 cannot be completed; its first half stays.
  EXPECT_EQ(p.plan_launch({1, 2}, 8 * MiB), Actions{});
  EXPECT_EQ(p.resident_bytes(1), 4 * MiB);
  EXPECT_EQ(p.resident_bytes(2), 4 * MiB);
}

// ---- LRU ---------------------------------------------------------------------------------------

TEST(Residency, EvictsTheLeastRecentlyReferencedRegion) {
  ResidencyPlanner p(small_chunks());
  for (RegionId id = 1; id <= 5; ++id) p.add_region(id, 4 * MiB);
  p.plan_launch({1}, 12 * MiB);
  p.plan_launch({2}, 12 * MiB);
  p.plan_launch({3}, 12 * MiB);
  p.plan_launch({1}, 12 * MiB);  // 1 becomes the most recent; 2 is now the oldest
  EXPECT_EQ(p.plan_launch({4}, 12 * MiB), (Actions{ev(2, 0, 4 * MiB), pf(4, 0, 4 * MiB)}));
  EXPECT_EQ(p.plan_launch({5}, 12 * MiB), (Actions{ev(3, 0, 4 * MiB), pf(5, 0, 4 * MiB)}));
  EXPECT_EQ(p.resident_bytes(1), 4 * MiB);
}

TEST(Residency, ReferencingAnOnHostRegionStillRefreshesItsRecency) {
  ResidencyPlanner p(small_chunks());
  for (RegionId id = 1; id <= 3; ++id) p.add_region(id, 4 * MiB);
  p.plan_launch({1, 2}, 8 * MiB);
  p.plan_launch({1}, 8 * MiB);  // 2 is now the least recent
  EXPECT_EQ(p.plan_launch({3}, 8 * MiB), (Actions{ev(2, 0, 4 * MiB), pf(3, 0, 4 * MiB)}));
}

TEST(Residency, TiesInOneLaunchAreBrokenByRegionId) {
  ResidencyPlanner p(small_chunks());
  for (RegionId id = 1; id <= 4; ++id) p.add_region(id, 4 * MiB);
  p.plan_launch({3, 1, 2}, 12 * MiB);
  EXPECT_EQ(p.plan_launch({4}, 12 * MiB), (Actions{ev(1, 0, 4 * MiB), pf(4, 0, 4 * MiB)}));
  EXPECT_EQ(p.plan_launch({}, 4 * MiB), (Actions{ev(2, 0, 4 * MiB), ev(3, 0, 4 * MiB)}));
}

TEST(Residency, EvictsFromTheEndOfARegionJustEnough) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 10 * MiB);
  p.add_region(2, 3 * MiB);
  p.plan_launch({1}, 10 * MiB);
  // 3 MiB needed: two 2 MiB chunks, from the end.
  EXPECT_EQ(p.plan_launch({2}, 10 * MiB), (Actions{ev(1, 6 * MiB, 4 * MiB), pf(2, 0, 3 * MiB)}));
  EXPECT_EQ(p.resident_bytes(1), 6 * MiB);
  EXPECT_EQ(p.resident_bytes(), 9 * MiB);
  // Back to 1: only its missing 4 MiB move; 2 (3 MiB: a 2 MiB chunk and a short 1 MiB one) goes.
  EXPECT_EQ(p.plan_launch({1}, 10 * MiB), (Actions{ev(2, 0, 3 * MiB), pf(1, 6 * MiB, 4 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 10 * MiB);
}

TEST(Residency, ShortLastChunkIsEvictedFirst) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 5 * MiB);  // chunks of 2, 2 and 1 MiB
  p.plan_launch({1}, 5 * MiB);
  EXPECT_EQ(p.plan_launch({}, 4 * MiB), (Actions{ev(1, 4 * MiB, 1 * MiB)}));
  EXPECT_EQ(p.plan_launch({}, 4 * MiB - 1), (Actions{ev(1, 2 * MiB, 2 * MiB)}));
  EXPECT_EQ(p.resident_bytes(1), 2 * MiB);
}

TEST(Residency, EvictionSpansSeveralRegionsInLruOrder) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB);
  p.add_region(2, 6 * MiB);
  p.add_region(3, 8 * MiB);
  p.plan_launch({1}, 10 * MiB);
  p.plan_launch({2}, 10 * MiB);
  // 8 MiB wanted, 0 free: all of 1 (4), then 4 MiB from the end of 2.
  EXPECT_EQ(p.plan_launch({3}, 10 * MiB), (Actions{ev(1, 0, 4 * MiB), ev(2, 2 * MiB, 4 * MiB), pf(3, 0, 8 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 10 * MiB);
}

// ---- chunking with the default 64 MiB chunks -----------------------------------------------------

TEST(Residency, GiBRegionPartialEvictionFreesWholeChunksJustEnough) {
  ResidencyPlanner p;  // 64 MiB chunks
  p.add_region(1, 1 * GiB);
  p.add_region(2, 100 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 1 * GiB), (Actions{pf(1, 0, 1 * GiB)}));
  // 100 MiB needed: two 64 MiB chunks from the end of the 1 GiB region.
  EXPECT_EQ(p.plan_launch({2}, 1 * GiB), (Actions{ev(1, 896 * MiB, 128 * MiB), pf(2, 0, 100 * MiB)}));
  EXPECT_EQ(p.resident_bytes(1), 896 * MiB);
  EXPECT_EQ(p.resident_bytes(), 996 * MiB);
  // Back to the big one: only its two missing chunks are prefetched; 2 (64 + 36 MiB) is evicted.
  EXPECT_EQ(p.plan_launch({1}, 1 * GiB), (Actions{ev(2, 0, 100 * MiB), pf(1, 896 * MiB, 128 * MiB)}));
  EXPECT_EQ(p.stats().prefetched_bytes, 1 * GiB + 100 * MiB + 128 * MiB);
  EXPECT_EQ(p.stats().evicted_bytes, 228 * MiB);
}

TEST(Residency, KernelTouchingARegionLargerThanTheBudgetLeavesItRemote) {
  ResidencyPlanner p;
  p.add_region(1, 4 * GiB);
  p.add_region(2, 512 * MiB);
  p.plan_launch({2}, 3 * GiB);
  EXPECT_EQ(p.plan_launch({1}, 3 * GiB), (Actions{remote(1, 4 * GiB)}))
      << "no eviction either: nothing is brought in";
  EXPECT_EQ(p.resident_bytes(2), 512 * MiB);
}

TEST(Residency, SmallChunksEvictOnlyWhatIsNeeded) {
  ResidencyConfig c;
  c.chunk_bytes = 2 * MiB;
  ResidencyPlanner p(c);
  p.add_region(1, 1 * GiB);
  p.add_region(2, 3 * MiB);
  p.plan_launch({1}, 1 * GiB);
  EXPECT_EQ(p.plan_launch({2}, 1 * GiB), (Actions{ev(1, 1 * GiB - 4 * MiB, 4 * MiB), pf(2, 0, 3 * MiB)}));
}

// ---- shrinking budget ----------------------------------------------------------------------------

TEST(Residency, ShrinkingBudgetEvictsEvenWithNothingToPrefetch) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB);
  p.add_region(2, 4 * MiB);
  p.add_region(3, 4 * MiB);
  p.plan_launch({1}, 12 * MiB);
  p.plan_launch({2}, 12 * MiB);
  p.plan_launch({3}, 12 * MiB);
  EXPECT_EQ(p.plan_launch({3}, 7 * MiB), (Actions{ev(1, 0, 4 * MiB), ev(2, 2 * MiB, 2 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 6 * MiB);
  EXPECT_EQ(p.plan_launch({3}, 7 * MiB), Actions{}) << "fits now";
}

TEST(Residency, ShrinkingBelowTheReferencedResidentBytesKeepsThem) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 8 * MiB);
  p.add_region(2, 4 * MiB);
  p.plan_launch({1, 2}, 12 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 6 * MiB), (Actions{ev(2, 0, 4 * MiB)}));
  EXPECT_EQ(p.resident_bytes(), 8 * MiB) << "over the budget: 1 is referenced";
  EXPECT_EQ(p.plan_launch({}, 6 * MiB), (Actions{ev(1, 6 * MiB, 2 * MiB)})) << "the next launch catches up";
}

// ---- remove_region / mark_on_host ------------------------------------------------------------

TEST(Residency, RemoveRegionFreesItsBudgetImmediately) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 8 * MiB);
  p.add_region(2, 8 * MiB);
  p.plan_launch({1}, 8 * MiB);
  p.remove_region(1);
  EXPECT_EQ(p.resident_bytes(), 0u);
  EXPECT_EQ(p.resident_bytes(1), 0u);
  EXPECT_EQ(p.plan_launch({2}, 8 * MiB), (Actions{pf(2, 0, 8 * MiB)}));
  EXPECT_EQ(p.stats().evicted_bytes, 0u);
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), Actions{}) << "removed: unknown now";
}

TEST(Residency, RemoveUnknownOrNeverReferencedRegionIsHarmless) {
  ResidencyPlanner p(small_chunks());
  p.remove_region(42);
  p.add_region(1, 4 * MiB);
  p.remove_region(1);
  p.remove_region(1);
  p.add_region(2, 4 * MiB);
  EXPECT_EQ(p.plan_launch({2}, 4 * MiB), (Actions{pf(2, 0, 4 * MiB)}));
}

TEST(Residency, RemovingRegionsKeepsTheLruListIntact) {
  ResidencyPlanner p(small_chunks());
  for (RegionId id = 1; id <= 5; ++id) p.add_region(id, 2 * MiB);
  for (RegionId id = 1; id <= 4; ++id) p.plan_launch({id}, 8 * MiB);
  p.remove_region(1);  // head
  p.remove_region(4);  // tail
  p.remove_region(3);  // now the tail again
  EXPECT_EQ(p.resident_bytes(), 2 * MiB);
  EXPECT_EQ(p.plan_launch({5}, 2 * MiB), (Actions{ev(2, 0, 2 * MiB), pf(5, 0, 2 * MiB)}));
  p.add_region(1, 2 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 2 * MiB), (Actions{ev(5, 0, 2 * MiB), pf(1, 0, 2 * MiB)}));
}

TEST(Residency, AddingAKnownIdReplacesTheRegion) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 8 * MiB);
  p.plan_launch({1}, 8 * MiB);
  p.add_region(1, 4 * MiB);
  EXPECT_EQ(p.resident_bytes(), 0u);
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{pf(1, 0, 4 * MiB)}));
}

TEST(Residency, MarkOnHostMakesTheRegionNonResident) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 6 * MiB);
  p.plan_launch({1}, 8 * MiB);
  p.mark_on_host(1);
  p.mark_on_host(99);
  EXPECT_EQ(p.resident_bytes(), 0u);
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{pf(1, 0, 6 * MiB)}));
}

TEST(Residency, HostTouchesAreNotPingPong) {
  ResidencyPlanner p(small_chunks(/*limit=*/0));
  p.add_region(1, 6 * MiB);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{pf(1, 0, 6 * MiB)})) << i;
    p.mark_on_host(1);
  }
  EXPECT_EQ(p.stats().pingpong_stops, 0u);
}

// Shared (the CPU's turns, policy/turns.h): on the host, never prefetched, untouched by step_learnt;
// cleared, prefetched again.
TEST(Residency, SharedRegionIsNeverPrefetchedUntilCleared) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 6 * MiB);
  p.add_region(2, 2 * MiB);
  p.plan_launch({1}, 8 * MiB);
  p.set_shared(1, true);
  p.set_shared(99, true);
  EXPECT_EQ(p.resident_bytes(), 0u);
  EXPECT_TRUE(p.stays_remote(1));
  p.step_learnt();
  EXPECT_EQ(p.plan_launch({1, 2}, 8 * MiB), (Actions{pf(2, 0, 2 * MiB)}));
  EXPECT_EQ(p.plan_ahead({1}, 8 * MiB), Actions{});
  p.set_shared(1, false);
  EXPECT_FALSE(p.stays_remote(1));
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{pf(1, 0, 6 * MiB)}));
}

// ---- ping-pong -------------------------------------------------------------------------------

// Two 8 MiB regions alternating on an 8 MiB budget: every launch evicts one and brings the other
// back, so from the third launch on each prefetch is a round trip.
TEST(Residency, PingPongStopsAfterTheLimitWithinTheWindow) {
  ResidencyPlanner p(small_chunks(/*limit=*/3, /*window=*/64));
  p.add_region(1, 8 * MiB);
  p.add_region(2, 8 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{pf(1, 0, 8 * MiB)}));
  EXPECT_EQ(p.plan_launch({2}, 8 * MiB), (Actions{ev(1, 0, 8 * MiB), pf(2, 0, 8 * MiB)}));
  for (int trip = 1; trip <= 3; ++trip) {  // three round trips each are allowed
    EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{ev(2, 0, 8 * MiB), pf(1, 0, 8 * MiB)})) << trip;
    EXPECT_EQ(p.plan_launch({2}, 8 * MiB), (Actions{ev(1, 0, 8 * MiB), pf(2, 0, 8 * MiB)})) << trip;
  }
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{remote(1, 8 * MiB)})) << "the fourth would exceed 3";
  EXPECT_TRUE(p.stays_remote(1));
  EXPECT_FALSE(p.stays_remote(2));
  EXPECT_EQ(p.stats().pingpong_stops, 1u);
  // 2 stays on the device from now on, and 1 never moves again.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(p.plan_launch({2}, 8 * MiB), Actions{});
    EXPECT_EQ(p.plan_launch({1}, 8 * MiB), Actions{});
  }
  EXPECT_EQ(p.stats().pingpong_stops, 1u) << "the note is given once";
  EXPECT_EQ(p.resident_bytes(2), 8 * MiB);
}

TEST(Residency, PingPongLimitZeroStopsAtTheFirstRoundTrip) {
  ResidencyPlanner p(small_chunks(/*limit=*/0));
  p.add_region(1, 8 * MiB);
  p.add_region(2, 8 * MiB);
  p.plan_launch({1}, 8 * MiB);
  p.plan_launch({2}, 8 * MiB);
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{remote(1, 8 * MiB)}));
}

TEST(Residency, PingPongWindowZeroTurnsDetectionOff) {
  ResidencyPlanner p(small_chunks(/*limit=*/0, /*window=*/0));
  p.add_region(1, 8 * MiB);
  p.add_region(2, 8 * MiB);
  for (int i = 0; i < 50; ++i) p.plan_launch({static_cast<RegionId>(1 + i % 2)}, 8 * MiB);
  EXPECT_EQ(p.stats().pingpong_stops, 0u);
  EXPECT_EQ(p.stats().prefetched_bytes, 50 * 8 * MiB);
}

// Regions used round-robin on a budget of one region: each is brought back `n - 1` launches after it
// was evicted. Limit 0: the first round trip stops a region.
uint64_t round_robin_stops(uint64_t n, uint64_t window, int launches) {
  ResidencyPlanner p(small_chunks(/*limit=*/0, window));
  for (RegionId id = 0; id < n; ++id) p.add_region(id, 8 * MiB);
  for (int i = 0; i < launches; ++i) p.plan_launch({static_cast<RegionId>(i % n)}, 8 * MiB);
  return p.stats().pingpong_stops;
}

TEST(Residency, EvictionOlderThanTheWindowIsNoRoundTrip) {
  // With 5 regions, a region evicted at launch e comes back at e + 4.
  EXPECT_EQ(round_robin_stops(5, /*window=*/4, 200), 0u) << "4 launches later is outside a window of 4";
  // Inside a window of 5: regions 0 to 3 stop on their return; 4 then is never evicted again.
  EXPECT_EQ(round_robin_stops(5, /*window=*/5, 200), 4u);
}

TEST(Residency, RoundTripsEachWithinTheWindowButSpreadOutDoNotStop) {
  // Limit 1, window 5, 5 regions round-robin: every return is a round trip (4 < 5), but a region's
  // round trips are 5 launches apart, so there is never more than one inside its window.
  ResidencyPlanner p(small_chunks(/*limit=*/1, /*window=*/5));
  for (RegionId id = 0; id < 5; ++id) p.add_region(id, 8 * MiB);
  for (int i = 0; i < 200; ++i) p.plan_launch({static_cast<RegionId>(i % 5)}, 8 * MiB);
  EXPECT_EQ(p.stats().pingpong_stops, 0u);
  EXPECT_EQ(p.stats().prefetched_bytes, 200 * 8 * MiB);
}

TEST(Residency, RoundTripsSpreadBeyondTheWindowDoNotStop) {
  ResidencyPlanner p(small_chunks(/*limit=*/1, /*window=*/10));
  p.add_region(1, 8 * MiB);
  p.add_region(2, 8 * MiB);
  auto quick_round_trip_of_1 = [&] {  // 1 is resident: evict it, then bring it straight back
    p.plan_launch({2}, 8 * MiB);
    return p.plan_launch({1}, 8 * MiB);
  };
  p.plan_launch({1}, 8 * MiB);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(quick_round_trip_of_1(), (Actions{ev(2, 0, 8 * MiB), pf(1, 0, 8 * MiB)})) << i;
    for (int idle = 0; idle < 10; ++idle) p.plan_launch({}, 8 * MiB);  // the trip ages out
  }
  EXPECT_EQ(p.stats().pingpong_stops, 0u);
  // Two round trips of 1 inside one window exceed the limit of 1.
  quick_round_trip_of_1();
  EXPECT_EQ(quick_round_trip_of_1(), (Actions{remote(1, 8 * MiB)}));
  EXPECT_EQ(p.stats().pingpong_stops, 1u);
}

TEST(Residency, StoppedRegionKeepsItsChunksUntilRoomIsNeeded) {
  ResidencyPlanner p(small_chunks(/*limit=*/1));
  p.add_region(1, 8 * MiB);
  p.add_region(2, 4 * MiB);
  p.add_region(3, 2 * MiB);
  p.add_region(4, 6 * MiB);
  p.plan_launch({1}, 8 * MiB);
  EXPECT_EQ(p.plan_launch({2}, 8 * MiB), (Actions{ev(1, 4 * MiB, 4 * MiB), pf(2, 0, 4 * MiB)}));
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{ev(2, 0, 4 * MiB), pf(1, 4 * MiB, 4 * MiB)})) << "trip 1";
  EXPECT_EQ(p.plan_launch({2}, 8 * MiB), (Actions{ev(1, 4 * MiB, 4 * MiB), pf(2, 0, 4 * MiB)}));
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{remote(1, 8 * MiB)})) << "trip 2 would exceed 1";
  EXPECT_EQ(p.resident_bytes(1), 4 * MiB) << "its resident half is not moved";
  // 2 (last used before 1) goes first when room is needed.
  EXPECT_EQ(p.plan_launch({3}, 8 * MiB), (Actions{ev(2, 2 * MiB, 2 * MiB), pf(3, 0, 2 * MiB)}));
  EXPECT_EQ(p.plan_launch({4}, 8 * MiB), (Actions{ev(2, 0, 2 * MiB), ev(1, 0, 4 * MiB), pf(4, 0, 6 * MiB)}));
  EXPECT_EQ(p.plan_launch({1}, 100 * MiB), Actions{}) << "never prefetched again";
  EXPECT_TRUE(p.stays_remote(1));
  // Freed and allocated again: a fresh region.
  p.remove_region(1);
  p.add_region(1, 8 * MiB);
  EXPECT_FALSE(p.stays_remote(1));
  EXPECT_EQ(p.plan_launch({1}, 100 * MiB), (Actions{pf(1, 0, 8 * MiB)}));
}

TEST(Residency, StoppedRegionThatIsReferencedKeepsItsChunks) {
  ResidencyPlanner p(small_chunks(/*limit=*/0));
  p.add_region(1, 8 * MiB);
  p.add_region(2, 4 * MiB);
  p.plan_launch({1}, 8 * MiB);
  p.plan_launch({2}, 8 * MiB);  // evicts half of 1
  EXPECT_EQ(p.plan_launch({1, 2}, 8 * MiB), Actions{}) << "no room to complete 1: no round trip, no stop";
  EXPECT_EQ(p.plan_launch({1}, 8 * MiB), (Actions{remote(1, 8 * MiB)})) << "the round trip is refused";
  EXPECT_EQ(p.resident_bytes(), 8 * MiB) << "2 was not evicted for it";
  EXPECT_EQ(p.plan_launch({1, 2}, 4 * MiB), Actions{})
      << "both referenced: nothing evicted, and a stopped region gets no too-large note";
  EXPECT_EQ(p.resident_bytes(), 8 * MiB);
  EXPECT_EQ(p.stats().too_large, 0u);
}

// ---- action order and stats -----------------------------------------------------------------

TEST(Residency, EvictionsThenPrefetchesThenNotes) {
  ResidencyPlanner p(small_chunks());
  p.add_region(1, 4 * MiB);
  p.add_region(2, 4 * MiB);
  p.add_region(3, 4 * MiB);
  p.add_region(4, 64 * MiB);
  p.plan_launch({1}, 8 * MiB);
  EXPECT_EQ(p.plan_launch({4, 3, 2}, 8 * MiB),
            (Actions{ev(1, 0, 4 * MiB), pf(3, 0, 4 * MiB), pf(2, 0, 4 * MiB), remote(4, 64 * MiB)}));
}

TEST(Residency, StatsCountBytesStopsAndTooLarge) {
  ResidencyPlanner p(small_chunks(/*limit=*/0));
  p.add_region(1, 6 * MiB);
  p.add_region(2, 6 * MiB);
  p.add_region(3, 20 * MiB);
  p.add_region(4, 30 * MiB);
  p.plan_launch({1}, 10 * MiB);     // +6
  p.plan_launch({2}, 10 * MiB);     // evicts 2 (the last chunk of 1), +6
  p.plan_launch({1, 3}, 10 * MiB);  // 1's return is a round trip: stops; 3 too large
  p.plan_launch({4}, 10 * MiB);     // 4 too large
  p.plan_launch({3}, 10 * MiB);     // already noted
  const PlannerStats& s = p.stats();
  EXPECT_EQ(s.prefetched_bytes, 12 * MiB);
  EXPECT_EQ(s.evicted_bytes, 2 * MiB);
  EXPECT_EQ(s.pingpong_stops, 1u);
  EXPECT_EQ(s.too_large, 2u);
}

// ---- early eviction ------------------------------------------------------------------------------

// A loop shaped like a training step in 8 MiB (4 chunks): region 1 (the "momentum") is used twice,
// then 40 launches cycle through five 2 MiB regions (10 to 14), which need its room: it is evicted
// for room, and comes back at the next step, 40 launches after its last use.
ResidencyConfig early_on() {
  ResidencyConfig c = small_chunks(/*limit=*/3, /*window=*/0);
  c.early = true;
  return c;
}

struct Loop {
  ResidencyPlanner p;
  uint64_t budget = 8 * MiB;
  explicit Loop(ResidencyConfig c = early_on()) : p(c) {
    p.add_region(1, 2 * MiB);
    for (RegionId f = 10; f < 15; ++f) p.add_region(f, 2 * MiB);
  }
  Actions use(RegionId id) { return p.plan_launch({id}, budget); }
  Actions fillers(int n, int from = 0) {
    Actions all;
    for (int j = from; j < from + n; ++j) {
      Actions a = use(10 + j % 5);
      all.insert(all.end(), a.begin(), a.end());
    }
    return all;
  }
  Actions step() {
    use(1);
    use(1);
    return fillers(40);
  }
  // Steps until region 1 was evicted for room after two uses twice in a row (the first step's
  // eviction, and the second's), then its two uses of the third step.
  void learn() {
    step();
    step();
    use(1);
    use(1);
  }
  // learn(), then two launches later region 1 is a candidate and is evicted early.
  void learn_and_evict_early() {
    learn();
    fillers(2);
    ASSERT_EQ(p.early_candidates(2), std::vector<RegionId>{1});
    p.evict_early({1});
  }
  static bool evicts(const Actions& a, RegionId id) {
    return std::any_of(a.begin(), a.end(), [&](const Action& x) { return x.kind == ActionKind::evict_to_host && x.region == id; });
  }
};

TEST(Residency, EarlyEvictionLearnsTheUsesAfterWhichRoomTookTheRegionTwiceInARow) {
  Loop l;
  EXPECT_TRUE(Loop::evicts(l.step(), 1)) << "evicted for room after its two uses";
  l.use(1);  // back, 40 launches after its last use
  l.use(1);
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(0), std::vector<RegionId>{}) << "once is not a pattern";
  EXPECT_TRUE(Loop::evicts(l.fillers(38, 2), 1)) << "evicted for room after two uses again";
  l.use(1);
  EXPECT_EQ(l.p.early_candidates(0), std::vector<RegionId>{}) << "one use of two";
  l.use(1);
  l.fillers(1);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "idle for one launch only";
  l.fillers(1, 1);
  ASSERT_EQ(l.p.early_candidates(2), std::vector<RegionId>{1});
  EXPECT_EQ(l.p.evict_early({1}), (Actions{ev(1, 0, 2 * MiB)}));
  EXPECT_EQ(l.p.resident_bytes(1), 0u);
  EXPECT_EQ(l.p.stats().early_bytes, 2 * MiB);
  EXPECT_FALSE(Loop::evicts(l.fillers(38, 2), 1)) << "already gone";
  EXPECT_EQ(l.p.evict_early({1}), Actions{}) << "nothing resident";
  // The budget was still full meanwhile, and it came back after a long gap: still expected.
  l.use(1);
  l.use(1);
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{1});
}

TEST(Residency, EarlyEvictionNeedsTheSameUsesTwiceInARow) {
  Loop l;
  l.step();
  l.use(1);  // three uses this time
  l.step();
  l.use(1);
  l.use(1);
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "evicted after 2 uses, then after 3";
  l.fillers(38, 2);  // evicted after 2 uses: 3, then 2
  l.step();           // 2 again
  l.use(1);
  l.use(1);
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{1}) << "after 2 and 2";
}

TEST(Residency, EarlyEvictionStopsForGoodWhenTheRegionComesBackSoon) {
  Loop l;
  ASSERT_NO_FATAL_FAILURE(l.learn_and_evict_early());
  l.fillers(2, 2);
  l.use(1);  // a third use this time, 4 launches after the second: the early eviction was wrong
  l.use(1);
  l.fillers(3);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "not expected any more";
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(Loop::evicts(l.step(), 1)) << "room takes it again";
  l.use(1);
  l.use(1);
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "never again";
}

TEST(Residency, EarlyEvictionStopsWhenRoomIsNoLongerNeeded) {
  Loop l;
  ASSERT_NO_FATAL_FAILURE(l.learn_and_evict_early());
  l.budget = 64 * MiB;  // everything fits now: the budget is never full
  l.fillers(40);
  l.use(1);
  l.use(1);
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "the copies would be for nothing";
  l.budget = 8 * MiB;  // full again: learnt again after two evictions for room
  l.fillers(38, 2);
  l.step();
  l.use(1);
  l.use(1);
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{1});
}

TEST(Residency, EarlyCandidatesNeedAllTheLearnedUsesAndNoSparing) {
  Loop l;
  l.step();
  l.step();
  l.budget = 64 * MiB;  // room for everything: it stays on the device from here on
  l.use(1);             // back: two uses learned; one so far
  l.fillers(3);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "one use of the two learned";
  l.use(1);
  l.fillers(3);
  l.p.set_spared(1, true);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "spared: expected to die, not to come back";
  l.p.set_spared(1, false);
  l.use(1);
  l.fillers(3);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "disarmed while spared; armed again when it comes back";
  EXPECT_EQ(l.p.resident_bytes(1), 2 * MiB) << "resident all along: the checks above are about the uses and sparing";
}

TEST(Residency, EarlyCandidatesAfterAllTheLearnedUsesOnly) {
  Loop l;
  l.step();
  l.step();
  l.budget = 64 * MiB;
  l.use(1);
  l.fillers(3);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{});
  l.use(1);
  l.fillers(3);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{1}) << "the second use armed it";
}

TEST(Residency, EarlyCandidatesCountTheUsesSinceTheRegionCameBack) {
  Loop l;
  l.learn();  // armed by its second use
  EXPECT_TRUE(Loop::evicts(l.fillers(40), 1)) << "not evicted early (nobody asked): room took it";
  l.use(1);   // back
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{}) << "one use since it came back, of two";
  l.use(1);
  l.fillers(2, 2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{1});
}

TEST(Residency, EarlyEvictionOffArmsNothing) {
  ResidencyConfig c = early_on();
  c.early = false;
  Loop l(c);
  l.learn();
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(0), std::vector<RegionId>{});
}

TEST(Residency, EarlyCandidatesForgetRegionsRemovedAndAddedAgain) {
  Loop l;
  l.learn();
  l.p.remove_region(1);
  l.p.add_region(1, 2 * MiB, 2 * MiB);  // the same id, a new region: nothing learned
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(0), std::vector<RegionId>{});
  l.p.remove_region(1);
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(0), std::vector<RegionId>{}) << "no stale entry answers for a gone id";
}

TEST(Residency, EarlyCandidatesListARegionOnceAfterItsIdCameBack) {
  Loop l;
  l.learn();  // armed
  l.p.remove_region(1);
  l.p.add_region(1, 2 * MiB);
  l.learn();  // the new region learns and is armed too
  l.fillers(2);
  EXPECT_EQ(l.p.early_candidates(2), std::vector<RegionId>{1});
}

TEST(Residency, EarlyCandidatesComeLeastRecentlyUsedFirstAndNeverTheLaunchsOwn) {
  ResidencyPlanner p(early_on());
  for (RegionId id : {1, 2}) p.add_region(id, 2 * MiB);
  for (RegionId f = 10; f < 15; ++f) p.add_region(f, 2 * MiB);
  auto fillers = [&](int n) {
    for (int j = 0; j < n; ++j) p.plan_launch({RegionId(10 + j % 5)}, 8 * MiB);
  };
  for (int k = 0; k < 2; ++k) {
    p.plan_launch({2}, 8 * MiB);
    p.plan_launch({1}, 8 * MiB);
    fillers(40);
  }
  p.plan_launch({2}, 8 * MiB);
  p.plan_launch({1}, 8 * MiB);
  fillers(1);  // its room comes from the fillers of the step before: they are older
  EXPECT_EQ(p.early_candidates(1), (std::vector<RegionId>{2, 1}));
  p.plan_launch({2}, 8 * MiB);
  EXPECT_EQ(p.early_candidates(0), std::vector<RegionId>{1}) << "2 is the launch's own";
  EXPECT_EQ(p.evict_early({2, 1}), (Actions{ev(1, 0, 2 * MiB)}));
  p.remove_region(1);
  EXPECT_EQ(p.early_candidates(0), std::vector<RegionId>{}) << "1 is freed, 2 the launch's own";
}

// ---- invariants over a long made-up run -------------------------------------------------------

// Replays the actions on a model of its own and checks, launch after launch: the model agrees with
// the planner; actions are chunk aligned, in order, and never evict a referenced region; resident
// bytes stay within the budget unless the referenced regions alone exceed it; and two planners fed
// the same input agree exactly.
TEST(Residency, LongRandomRunKeepsTheInvariants) {
  ResidencyConfig cfg = small_chunks(/*limit=*/2, /*window=*/16);
  cfg.early = true;
  ResidencyPlanner p(cfg), twin(cfg);
  std::map<RegionId, uint64_t> size, resident;
  uint64_t state = 12345;
  auto rnd = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  for (int launch = 0; launch < 3000; ++launch) {
    const uint64_t op = rnd(20);
    if (op == 0) {
      RegionId id = rnd(24);
      uint64_t bytes = 1 + rnd(24 * MiB);
      p.add_region(id, bytes);
      twin.add_region(id, bytes);
      size[id] = bytes;
      resident[id] = 0;
    } else if (op == 1) {
      RegionId id = rnd(24);
      p.remove_region(id);
      twin.remove_region(id);
      size.erase(id);
      resident.erase(id);
    } else if (op == 2) {
      RegionId id = rnd(24);
      p.mark_on_host(id);
      twin.mark_on_host(id);
      if (resident.count(id)) resident[id] = 0;
    }
    std::vector<RegionId> refs;
    for (uint64_t n = rnd(5); n > 0; --n) refs.push_back(rnd(26));
    const uint64_t budget = 8 * MiB + rnd(40 * MiB);
    const Actions got = p.plan_launch(refs, budget);
    ASSERT_EQ(got, twin.plan_launch(refs, budget)) << "deterministic";

    int phase = 0;
    for (const Action& a : got) {
      ASSERT_TRUE(size.count(a.region));
      const int ph = a.kind == ActionKind::evict_to_host ? 0 : a.kind == ActionKind::prefetch_to_device ? 1 : 2;
      ASSERT_GE(ph, phase) << "evictions, then prefetches, then notes";
      phase = ph;
      const bool is_ref = std::find(refs.begin(), refs.end(), a.region) != refs.end();
      ASSERT_GT(a.bytes, 0u);
      if (a.kind == ActionKind::stay_remote) {
        ASSERT_EQ(a.offset, 0u);
        ASSERT_EQ(a.bytes, size[a.region]);
        ASSERT_TRUE(is_ref);
        continue;
      }
      ASSERT_EQ(a.offset % cfg.chunk_bytes, 0u);
      ASSERT_EQ(a.offset + a.bytes, a.kind == ActionKind::evict_to_host ? resident[a.region] : size[a.region]);
      if (a.kind == ActionKind::evict_to_host) {
        ASSERT_FALSE(is_ref) << "a referenced region was evicted";
        resident[a.region] = a.offset;
      } else {
        ASSERT_TRUE(is_ref);
        ASSERT_EQ(a.offset, resident[a.region]) << "only missing chunks";
        resident[a.region] = size[a.region];
      }
    }
    if (rnd(4) == 0) {
      const std::vector<RegionId> ids = p.early_candidates(2);
      ASSERT_EQ(ids, twin.early_candidates(2));
      const Actions early = p.evict_early(ids);
      ASSERT_EQ(early, twin.evict_early(ids));
      for (const Action& a : early) {
        ASSERT_EQ(a.kind, ActionKind::evict_to_host);
        ASSERT_TRUE(std::find(refs.begin(), refs.end(), a.region) == refs.end()) << "the launch's own";
        ASSERT_EQ(a.offset, 0u) << "all of it";
        ASSERT_EQ(a.bytes, resident[a.region]);
        resident[a.region] = 0;
      }
    }
    uint64_t total = 0, referenced_resident = 0;
    for (auto& [id, bytes] : resident) {
      ASSERT_EQ(p.resident_bytes(id), bytes) << "region " << id;
      total += bytes;
      if (std::find(refs.begin(), refs.end(), id) != refs.end()) referenced_resident += bytes;
    }
    ASSERT_EQ(p.resident_bytes(), total);
    if (referenced_resident <= budget) {
      ASSERT_LE(total, budget);
    } else {
      ASSERT_EQ(total, referenced_resident) << "everything else was evicted";
    }
  }
  EXPECT_GT(p.stats().prefetched_bytes, 0u);
  EXPECT_GT(p.stats().evicted_bytes, 0u);
  EXPECT_GT(p.stats().pingpong_stops, 0u);
  EXPECT_GT(p.stats().too_large, 0u);
  EXPECT_GT(p.stats().early_bytes, 0u);
}

}  // namespace
}  // namespace gms::policy
