// The residency planner with what a step learner knows (policy/residency.h: set_next_use,
// plan_ahead): room from the regions used again farthest ahead, and regions brought in ahead of
// their launches into free room.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "policy/residency.h"

namespace gms::policy {
namespace {

constexpr uint64_t MiB = 1ull << 20;

struct Table : NextUse {
  std::map<RegionId, uint64_t> next;
  std::map<RegionId, bool> running;
  uint64_t clock = 0;
  uint64_t now() const override { return clock; }
  // One launch later: every next use is one nearer (those due now stay due).
  void tick() {
    ++clock;
    for (auto& [id, n] : next) n = n == 0 || n >= kUnknown ? n : n - 1;
  }
  uint64_t next_use(RegionId id) const override {
    auto it = next.find(id);
    return it == next.end() ? kUnknown : it->second;
  }
  bool busy(RegionId id) const override { return running.count(id) && running.at(id); }
};

ResidencyConfig chunks_of_2m() {
  ResidencyConfig c;
  c.chunk_bytes = 2 * MiB;
  return c;
}

Action ev(RegionId id, uint64_t offset, uint64_t bytes) { return {ActionKind::evict_to_host, id, offset, bytes}; }
Action pf(RegionId id, uint64_t offset, uint64_t bytes) { return {ActionKind::prefetch_to_device, id, offset, bytes}; }

// Early eviction on, a long absence being two launches, no ping-pong stops; regions 1 to `n` of
// 2 MiB, 1 evicted for room after one use, twice, with long gaps: learnt as an early candidate.
ResidencyConfig early_config() {
  ResidencyConfig c = chunks_of_2m();
  c.pingpong_window = 0;
  c.early = true;
  c.early_min_gap = 2;
  return c;
}
void learn_one_as_candidate(ResidencyPlanner& p, RegionId n) {
  for (RegionId id = 1; id <= n; ++id) p.add_region(id, 2 * MiB);
  for (int round = 0; round < 3; ++round) {
    p.plan_launch({1}, 4 * MiB);
    p.plan_launch({2}, 4 * MiB);
    p.plan_launch({3}, 4 * MiB);  // 1 out for room
    p.plan_launch({2}, 4 * MiB);
    p.plan_launch({3}, 4 * MiB);
  }
}
bool armed(ResidencyPlanner& p, RegionId id) {
  const std::vector<RegionId> ids = p.early_candidates(0);
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Four regions on the device, used in order 1, 2, 3, 4 (1 the least recently used). A fifth needs
// room for one: by recency 1 goes; by next use the one used again farthest ahead, and one freed
// before its next use before any.
TEST(ResidencyNextUse, RoomFromTheFarthestNextUse) {
  auto fill = [](ResidencyPlanner& p) {
    for (RegionId id = 1; id <= 5; ++id) p.add_region(id, 4 * MiB);
    for (RegionId id = 1; id <= 4; ++id) p.plan_launch({id}, 16 * MiB);
  };
  {
    ResidencyPlanner p(chunks_of_2m());
    fill(p);
    EXPECT_EQ(p.plan_launch({5}, 16 * MiB), (std::vector<Action>{ev(1, 0, 4 * MiB), pf(5, 0, 4 * MiB)}));
  }
  Table t;
  t.next = {{1, 3}, {2, 50}, {3, 7}, {4, 1}};
  {
    ResidencyPlanner p(chunks_of_2m());
    fill(p);
    p.set_next_use(&t);
    EXPECT_EQ(p.plan_launch({5}, 16 * MiB), (std::vector<Action>{ev(2, 0, 4 * MiB), pf(5, 0, 4 * MiB)}));
    EXPECT_EQ(p.stats().by_next_use, 1u);
  }
  t.next[3] = NextUse::kNever;
  {
    ResidencyPlanner p(chunks_of_2m());
    fill(p);
    p.set_next_use(&t);
    EXPECT_EQ(p.plan_launch({5}, 16 * MiB), (std::vector<Action>{ev(3, 0, 4 * MiB), pf(5, 0, 4 * MiB)}));
  }
  // Regions it cannot say about go only after those it can, least recently used first.
  t.next = {{3, 9}};
  {
    ResidencyPlanner p(chunks_of_2m());
    fill(p);
    p.set_next_use(&t);
    EXPECT_EQ(p.plan_launch({5}, 12 * MiB),
              (std::vector<Action>{ev(3, 0, 4 * MiB), ev(1, 0, 4 * MiB), pf(5, 0, 4 * MiB)}));
  }
}

// The farthest next use is often the region just used, which the GPU may still be running: the
// farthest that the GPU is done with goes first, unless it is used again soon (within 64
// launches); then the farthest goes, busy or not.
TEST(ResidencyNextUse, RoomFromWhatTheGpuIsDoneWith) {
  auto fill = [](ResidencyPlanner& p) {
    for (RegionId id = 1; id <= 5; ++id) p.add_region(id, 4 * MiB);
    for (RegionId id = 1; id <= 4; ++id) p.plan_launch({id}, 16 * MiB);
  };
  Table t;
  t.next = {{1, 600}, {2, 8}, {3, 900}, {4, 1000}};
  t.running = {{4, true}};
  {
    ResidencyPlanner p(chunks_of_2m());
    fill(p);
    p.set_next_use(&t);
    EXPECT_EQ(p.plan_launch({5}, 16 * MiB), (std::vector<Action>{ev(3, 0, 4 * MiB), pf(5, 0, 4 * MiB)}));
  }
  t.running = {{4, true}, {3, true}};
  {
    ResidencyPlanner p(chunks_of_2m());
    fill(p);
    p.set_next_use(&t);
    EXPECT_EQ(p.plan_launch({5}, 16 * MiB), (std::vector<Action>{ev(1, 0, 4 * MiB), pf(5, 0, 4 * MiB)}));
  }
  {
    ResidencyConfig c = chunks_of_2m();
    c.busy_lead = 4 * MiB;  // one busy region's bytes
    ResidencyPlanner p(c);
    fill(p);
    p.set_next_use(&t);
    EXPECT_EQ(p.plan_launch({5}, 16 * MiB), (std::vector<Action>{ev(3, 0, 4 * MiB), pf(5, 0, 4 * MiB)}))
        << "4 is passed over, which uses up the lead: 3 goes, busy or not, before 1, used again sooner";
  }
  t.running = {{4, true}, {3, true}, {1, true}};
  {
    ResidencyPlanner p(chunks_of_2m());
    fill(p);
    p.set_next_use(&t);
    EXPECT_EQ(p.plan_launch({5}, 16 * MiB), (std::vector<Action>{ev(4, 0, 4 * MiB), pf(5, 0, 4 * MiB)}))
        << "2 is used again far sooner than 4: waiting for 4 beats bringing 2 back";
  }
}

// A region the launch uses is never the victim, whatever its next use says.
TEST(ResidencyNextUse, NeverEvictsWhatTheLaunchUses) {
  ResidencyPlanner p(chunks_of_2m());
  for (RegionId id = 1; id <= 3; ++id) p.add_region(id, 4 * MiB);
  p.plan_launch({1, 2}, 8 * MiB);
  Table t;
  t.next = {{1, NextUse::kNever}, {2, 100}, {3, 0}};
  p.set_next_use(&t);
  EXPECT_EQ(p.plan_launch({1, 3}, 8 * MiB), (std::vector<Action>{ev(2, 0, 4 * MiB), pf(3, 0, 4 * MiB)}));
}

// Ahead of their launches: into free room only, in the order given, up to the first that does not fit.
TEST(ResidencyNextUse, AheadIntoFreeRoomOnly) {
  ResidencyPlanner p(chunks_of_2m());
  p.add_region(1, 4 * MiB, 4 * MiB);  // on the device
  p.add_region(2, 4 * MiB);
  p.add_region(3, 8 * MiB);
  p.add_region(4, 2 * MiB);
  EXPECT_EQ(p.plan_ahead({1, 2, 3, 4}, 12 * MiB), (std::vector<Action>{pf(2, 0, 4 * MiB)}))
      << "3 does not fit in the 4 MiB left, and 4 waits behind it";
  EXPECT_EQ(p.resident_bytes(), 8 * MiB);
  EXPECT_EQ(p.stats().ahead_bytes, 4 * MiB);
  // The next launch finds 2 in place.
  EXPECT_EQ(p.plan_launch({2}, 12 * MiB), std::vector<Action>{});
  // A region brought ahead is the most recently used: room for 3 takes 1 first.
  EXPECT_EQ(p.plan_launch({3}, 12 * MiB), (std::vector<Action>{ev(1, 0, 4 * MiB), pf(3, 0, 8 * MiB)}));
}

// An early eviction made while the step is known is checked against room by next use: once room
// keeps a region (one the GPU is done with) used again later than the region evicted early, next
// use would have kept the evicted one instead; it moved bytes for nothing, and what taught it is
// forgotten. One used again later than anything kept stays an early candidate.
TEST(ResidencyNextUse, EarlyEvictionNextUseWouldNotMakeIsForgotten) {
  for (const uint64_t next_of_1 : {70ull, 300ull}) {
    ResidencyPlanner p(early_config());
    learn_one_as_candidate(p, 6);
    p.plan_launch({1}, 4 * MiB);
    p.plan_launch({2}, 4 * MiB);
    ASSERT_EQ(p.early_candidates(0), std::vector<RegionId>{1});
    Table t;
    t.next = {{1, next_of_1}, {2, 0}, {3, 200}, {4, 100}, {5, 80}, {6, 1}};
    p.set_next_use(&t);
    EXPECT_EQ(p.evict_early({1}), std::vector<Action>{ev(1, 0, 2 * MiB)});
    p.plan_launch({3, 4}, 8 * MiB);  // room for 3 and 4 beside 2, with 1 away
    // Room for 5 and 6: 3 (used again farthest) goes, 4 is kept, used again 100 launches ahead.
    t.tick();
    EXPECT_EQ(p.plan_launch({5, 6}, 8 * MiB), (std::vector<Action>{ev(3, 0, 2 * MiB), pf(5, 0, 2 * MiB), pf(6, 0, 2 * MiB)}));
    if (next_of_1 < 100) {
      EXPECT_EQ(p.stats().early_excess, 1u) << "1 is used again before 4, which room kept";
    } else {
      EXPECT_EQ(p.stats().early_excess, 0u) << "1 is used again after anything room kept";
    }
    // 1 comes back at its use and goes round its loop again.
    p.set_next_use(nullptr);
    p.plan_launch({1}, 8 * MiB);
    p.plan_launch({2}, 8 * MiB);
    p.plan_launch({3}, 8 * MiB);
    EXPECT_EQ(p.early_candidates(0).empty(), next_of_1 < 100) << next_of_1;
  }
}

// With the step known, an early candidate says how much room is about to be needed; next use says
// which regions make it: the ones used again farthest ahead that the GPU is done with (not used
// again within early_min_gap launches), as room by next use would choose them, only earlier. The candidate
// that next use keeps is disarmed.
TEST(ResidencyNextUse, EarlyEvictionTakesWhatNextUseWouldTake) {
  ResidencyPlanner p(early_config());
  learn_one_as_candidate(p, 6);
  p.plan_launch({1}, 12 * MiB);
  p.plan_launch({4, 5}, 12 * MiB);
  p.plan_launch({6}, 12 * MiB);  // on the device: 1 to 6
  ASSERT_TRUE(armed(p, 1));
  Table t;
  t.next = {{1, 90}, {2, 40}, {3, 30}, {4, 300}, {5, 200}, {6, 0}};
  t.running[4] = true;
  p.set_next_use(&t);
  EXPECT_EQ(p.evict_early({1}), std::vector<Action>{ev(5, 0, 2 * MiB)})
      << "4 is farther but the GPU may still use it; 5 goes in place of 1";
  EXPECT_EQ(p.stats().early_refused, 1u);
  EXPECT_FALSE(armed(p, 1)) << "next use keeps 1: disarmed";
  EXPECT_EQ(p.resident_bytes(1), 2 * MiB);
  // Nothing idle that is used again early_min_gap launches ahead or later: nothing goes.
  t.next = {{1, 1}, {2, 1}, {3, 0}, {4, 300}, {6, 0}};
  EXPECT_EQ(p.evict_early({1}), std::vector<Action>{});
  // Without the step, the candidate itself.
  p.set_next_use(nullptr);
  EXPECT_EQ(p.evict_early({1}), std::vector<Action>{ev(1, 0, 2 * MiB)});
}

// Next uses count the learner's launches, which the planner does not all see (a launch that uses
// no region it knows never reaches it): the check of an early eviction compares both next uses on
// the learner's clock. A use that came and went while the region was away (the step changed) is
// no verdict.
TEST(ResidencyNextUse, EarlyEvictionIsCheckedOnTheLearnersClock) {
  for (const bool passed : {false, true}) {
    ResidencyPlanner p(early_config());
    for (RegionId id = 1; id <= 4; ++id) p.add_region(id, 2 * MiB);
    p.plan_launch({1, 2, 3}, 8 * MiB);
    p.plan_launch({4}, 8 * MiB);
    Table t;
    t.next = {{1, 150}, {2, 100}, {3, 100}, {4, 0}};
    p.set_next_use(&t);
    ASSERT_EQ(p.evict_early({1}), std::vector<Action>{ev(1, 0, 2 * MiB)});  // due at launch 151
    // 100 launches (or 200) that use nothing the planner knows, then one that needs room: 2 goes
    // (used again farthest), 3 is kept: used again 60 launches on, at launch 161 (or 261). On the
    // planner's count (3 launches) that would be launch 64, before 1's.
    for (int k = 0; k < (passed ? 200 : 100); ++k) t.tick();
    t.next[2] = 300;
    t.next[3] = 60;
    p.add_region(5, 4 * MiB);
    EXPECT_EQ(p.plan_launch({5}, 8 * MiB), (std::vector<Action>{ev(2, 0, 2 * MiB), pf(5, 0, 4 * MiB)}));
    EXPECT_EQ(p.stats().early_excess, passed ? 0u : 1u)
        << (passed ? "1's use came and went: no verdict" : "1 is used at 151, before 3 at 161: next use would have kept 1");
  }
}

// Early candidates are judged by next use only when it says: duplicates count once, and when the
// regions asked whether the GPU is done with them run out (32 at most) before enough were found,
// nothing goes and the candidate waits for its next cycle, not refused.
TEST(ResidencyNextUse, EarlyEvictionWithoutAnAnswerMovesNothing) {
  ResidencyPlanner p(early_config());
  constexpr RegionId kBusy = 40;
  learn_one_as_candidate(p, kBusy + 1);
  std::vector<RegionId> all;
  for (RegionId id = 1; id <= kBusy; ++id) all.push_back(id);
  p.plan_launch(all, 1024 * MiB);
  p.plan_launch({kBusy + 1}, 1024 * MiB);
  ASSERT_TRUE(armed(p, 1));
  Table t;
  for (RegionId id = 2; id <= kBusy; ++id) {
    t.next[id] = 300;
    t.running[id] = true;
  }
  t.next[1] = 90;
  t.next[kBusy + 1] = 0;
  p.set_next_use(&t);
  EXPECT_EQ(p.evict_early({1, 1}), std::vector<Action>{}) << "39 busy regions used later: no answer in 32";
  EXPECT_EQ(p.stats().early_refused, 0u);
  EXPECT_FALSE(armed(p, 1));
  for (RegionId id = 2; id <= kBusy; ++id) t.running[id] = false;
  EXPECT_EQ(p.evict_early({1, 1}), std::vector<Action>{ev(2, 0, 2 * MiB)}) << "once, for 2 MiB";
  EXPECT_EQ(p.stats().early_refused, 1u);
}

// Ping-pong stops are for what nobody foresees: once a step is known they are lifted, and round trips
// no longer count while next uses are known.
TEST(ResidencyNextUse, KnownStepLiftsPingPongStops) {
  ResidencyConfig c = chunks_of_2m();
  c.pingpong_limit = 0;  // the first round trip stops a region
  ResidencyPlanner p(c);
  p.add_region(1, 4 * MiB);
  p.add_region(2, 4 * MiB);
  p.plan_launch({1}, 4 * MiB);
  p.plan_launch({2}, 4 * MiB);  // 1 out
  p.plan_launch({1}, 4 * MiB);  // 1 back within the window: stopped
  EXPECT_TRUE(p.stays_remote(1));
  p.step_learnt();
  EXPECT_FALSE(p.stays_remote(1));
  Table t;
  t.next = {{1, 1}, {2, 1}};
  p.set_next_use(&t);
  for (int k = 0; k < 6; ++k) {
    const std::vector<Action> a = p.plan_launch({static_cast<RegionId>(1 + k % 2)}, 4 * MiB);
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a.back().kind, ActionKind::prefetch_to_device) << k;
  }
  EXPECT_FALSE(p.stays_remote(1));
  EXPECT_FALSE(p.stays_remote(2));
}

// A loop over six layers of 2 MiB with room for four, one launch each. By recency every layer is
// evicted for room after its one use, a long gap before it comes back, loop after loop: early
// eviction learns every layer, and would evict each one after its use. Once the step is learnt,
// that lesson is forgotten and next use keeps three layers: half the moves of recency each loop.
TEST(ResidencyNextUse, KnownStepForgetsWhatRecencyTaughtEarlyEviction) {
  ResidencyConfig c = chunks_of_2m();
  c.pingpong_window = 0;
  c.early = true;
  c.early_min_gap = 2;
  ResidencyPlanner p(c);
  constexpr int kLayers = 6;
  for (RegionId id = 1; id <= kLayers; ++id) p.add_region(id, 2 * MiB);
  const uint64_t budget = 8 * MiB;
  auto loop = [&](Table* t) {
    uint64_t in = 0;
    for (int k = 0; k < kLayers; ++k) {
      if (t) {
        // Launches from the next one (this launch's) until each layer's next use.
        for (int j = 0; j < kLayers; ++j) t->next[1 + j] = static_cast<uint64_t>((j - k + kLayers) % kLayers);
      }
      for (const Action& a : p.plan_launch({static_cast<RegionId>(1 + k)}, budget)) {
        if (a.kind == ActionKind::prefetch_to_device) in += a.bytes;
      }
      if (t) {
        for (RegionId id : p.early_candidates(0)) p.evict_early({id});
      }
    }
    return in;
  };
  for (int k = 0; k < 4; ++k) loop(nullptr);
  EXPECT_EQ(loop(nullptr), 6 * 2 * MiB) << "recency brings every layer back";
  EXPECT_FALSE(p.early_candidates(0).empty()) << "recency taught early eviction";
  p.step_learnt();
  EXPECT_TRUE(p.early_candidates(0).empty());
  Table t;
  p.set_next_use(&t);
  for (int k = 0; k < 6; ++k) {
    const uint64_t in = loop(&t);
    EXPECT_LE(in, 3 * 2 * MiB) << "loop " << k << " (recency's lesson evicts every layer: 12 MiB)";
  }
}

}  // namespace
}  // namespace gms::policy
