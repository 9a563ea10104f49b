// policy/turns.h: CPU turns on managed memory found from sampled pages, the region kept on the host
// while they go on, probes that give it back, and the end of the turns.
#include "policy/turns.h"

#include <gtest/gtest.h>

namespace gms::policy {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kR = 0x7f0000000000;

TEST(Turns, TwoTurnsShareTheRegion) {
  TurnTracker t;
  t.add(kR, 256 * kMiB);
  // First launch: the CPU initialised it, the planner never had it: no turn.
  EXPECT_EQ(t.launched(kR, 16, 16, false), TurnAction::none);
  EXPECT_TRUE(t.wants_sample(kR));
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::bring_back);
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::place_on_host);
  EXPECT_TRUE(t.shared(kR));
  EXPECT_FALSE(t.wants_sample(kR));
  EXPECT_EQ(t.shares(), 1u);
}

TEST(Turns, FewPagesBackAreNoTurn) {
  TurnTracker t;
  t.add(kR, 256 * kMiB);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(t.launched(kR, 3, 16, true), TurnAction::none);  // under a quarter
  EXPECT_EQ(t.launched(kR, 4, 16, true), TurnAction::bring_back);
  EXPECT_FALSE(t.shared(kR));
}

TEST(Turns, SmallAndUnknownRegionsAreLeftAlone) {
  TurnTracker t;
  t.add(kR, 2 * kMiB);
  EXPECT_FALSE(t.wants_sample(kR));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::none);
  EXPECT_EQ(t.launched(kR + 1, 16, 16, true), TurnAction::none);
}

TEST(Turns, TurnsFarApartDoNotAddUp) {
  TurnsConfig cfg;
  cfg.window = 8;
  TurnTracker t(cfg);
  t.add(kR, 64 * kMiB);
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::bring_back);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t.launched(kR, 0, 16, true), TurnAction::none);
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::bring_back);  // 9 launches later: starts over
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::place_on_host);
}

// Shared, then probed: the CPU answers each probe, and the wait doubles up to its cap.
TEST(Turns, ProbesTheCpuAnswersBackOff) {
  TurnsConfig cfg;
  cfg.first_probe = 2;
  cfg.max_probe = 8;
  TurnTracker t(cfg);
  t.add(kR, 64 * kMiB);
  t.launched(kR, 16, 16, true);
  ASSERT_EQ(t.launched(kR, 16, 16, true), TurnAction::place_on_host);
  for (uint64_t wait : {2, 4, 8, 8}) {
    for (uint64_t i = 1; i < wait; ++i) EXPECT_EQ(t.launched(kR, 0, 0, false), TurnAction::none) << wait;
    EXPECT_EQ(t.launched(kR, 0, 0, false), TurnAction::place_back) << wait;
    EXPECT_TRUE(t.wants_sample(kR));
    EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::place_on_host) << wait;
  }
  EXPECT_EQ(t.probes(), 4u);
  EXPECT_EQ(t.ended(), 0u);
}

// A probe with no CPU turn for more than twice the longest gap between turns ends the sharing; the
// region then needs two turns again.
TEST(Turns, ProbeWithNoTurnEndsIt) {
  TurnsConfig cfg;
  cfg.first_probe = 1;
  TurnTracker t(cfg);
  t.add(kR, 64 * kMiB);
  // Three launches a round: a turn every third launch.
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::bring_back);
  EXPECT_EQ(t.launched(kR, 0, 16, true), TurnAction::none);
  EXPECT_EQ(t.launched(kR, 0, 16, true), TurnAction::none);
  ASSERT_EQ(t.launched(kR, 16, 16, true), TurnAction::place_on_host);
  ASSERT_EQ(t.launched(kR, 0, 0, false), TurnAction::place_back);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.launched(kR, 0, 16, true), TurnAction::none);  // 2 x gap of 3
  EXPECT_EQ(t.ended(), 0u);
  EXPECT_EQ(t.launched(kR, 0, 16, true), TurnAction::none);
  EXPECT_EQ(t.ended(), 1u);
  EXPECT_FALSE(t.shared(kR));
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::bring_back);  // one turn is not enough again
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::place_on_host);
}

TEST(Turns, RemovedOrReaddedStartsOver) {
  TurnTracker t;
  t.add(kR, 64 * kMiB);
  t.launched(kR, 16, 16, true);
  ASSERT_EQ(t.launched(kR, 16, 16, true), TurnAction::place_on_host);
  t.add(kR, 64 * kMiB);  // freed and made again at the same address
  EXPECT_FALSE(t.shared(kR));
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::bring_back);
  t.remove(kR);
  EXPECT_FALSE(t.wants_sample(kR));
  EXPECT_EQ(t.launched(kR, 16, 16, true), TurnAction::none);
}

}  // namespace
}  // namespace gms::policy
