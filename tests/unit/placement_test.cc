#include <gtest/gtest.h>
#include <string>

#include "policy/placement.h"

namespace gms::policy {
namespace {

constexpr uint64_t GiB = 1ull << 30;
constexpr uint64_t MiB = 1ull << 20;

PlacementConfig cfg(PolicyKind p, uint64_t managed_limit = 0) {
  PlacementConfig c;
  c.policy = p;
  c.managed_limit = managed_limit;
  c.limit_enforced = true;
  return c;
}

Where where(const PlacementConfig& c, uint64_t limit, uint64_t used, uint64_t bytes, uint64_t managed_in_use = 0,
            bool capturing = false, bool refused = false) {
  return place(c, {limit, used}, managed_in_use, {bytes, capturing, refused}).where;
}

TEST(Placement, SpillKeepsDeviceUntilTheBudgetIsExactlyFull) {
  auto c = cfg(PolicyKind::spill);
  EXPECT_EQ(where(c, 8 * GiB, 0, 8 * GiB), Where::device);
  EXPECT_EQ(where(c, 8 * GiB, 7 * GiB, GiB), Where::device) << "exactly fits";
  EXPECT_EQ(where(c, 8 * GiB, 7 * GiB, GiB + 1), Where::managed) << "one byte over";
  EXPECT_EQ(where(c, 8 * GiB, 9 * GiB, 1), Where::managed) << "already over (limit lowered)";
}

TEST(Placement, SpillToPinnedWhenAsked) {
  auto c = cfg(PolicyKind::spill);
  c.spill = SpillTarget::pinned;
  EXPECT_EQ(where(c, GiB, GiB, MiB), Where::pinned);
  EXPECT_EQ(where(c, GiB, 0, MiB), Where::device);
}

TEST(Placement, DriverRefusalSpillsEvenInsideTheBudget) {
  // The default budget is the card's memory, but other processes may hold part of it.
  EXPECT_EQ(where(cfg(PolicyKind::spill), 80 * GiB, GiB, GiB, 0, false, true), Where::managed);
}

TEST(Placement, ManagedLimitTurnsSpillIntoOutOfMemory) {
  auto c = cfg(PolicyKind::spill, 4 * GiB);
  EXPECT_EQ(where(c, GiB, GiB, 2 * GiB, 2 * GiB), Where::managed) << "exactly reaches the cap";
  EXPECT_EQ(where(c, GiB, GiB, 2 * GiB + 1, 2 * GiB), Where::out_of_memory);
  EXPECT_EQ(where(c, GiB, GiB, 1, 5 * GiB), Where::out_of_memory) << "already past the cap";
  EXPECT_EQ(where(c, GiB, 0, 2 * GiB + 1, 4 * GiB), Where::out_of_memory) << "over budget and over cap";
  EXPECT_EQ(where(c, GiB, 0, MiB, 4 * GiB), Where::device) << "the cap never limits device memory";
}

TEST(Placement, OffPassesThroughUnlessALimitIsEnforced) {
  auto c = cfg(PolicyKind::off);
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, 1), Where::out_of_memory);
  EXPECT_EQ(where(c, 8 * GiB, 0, 8 * GiB), Where::device);
  c.limit_enforced = false;
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, 1), Where::device);
}

TEST(Placement, ManagedPinnedAndSwapPoliciesConvertFromTheMinimumSize) {
  for (auto p : {PolicyKind::managed, PolicyKind::pinned, PolicyKind::swap}) {
    auto c = cfg(p);
    Where target = p == PolicyKind::managed ? Where::managed : p == PolicyKind::pinned ? Where::pinned : Where::swap;
    EXPECT_EQ(where(c, 8 * GiB, 0, MiB), target);
    EXPECT_EQ(where(c, 8 * GiB, 0, MiB - 1), Where::device) << "small ones stay ordinary";
    EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, 4096), target) << "small ones over budget convert too";
  }
}

TEST(Placement, DuringCaptureDeviceMemoryWithinTheBudget) {
  for (auto p : {PolicyKind::spill, PolicyKind::managed, PolicyKind::pinned, PolicyKind::swap}) {
    auto c = cfg(p);
    EXPECT_EQ(where(c, 8 * GiB, 0, GiB, 0, true), Where::device);
  }
  // Past it, the experts' policies say out of memory, as a card of that size would.
  for (auto p : {PolicyKind::managed, PolicyKind::pinned, PolicyKind::swap}) {
    EXPECT_EQ(where(cfg(p), 8 * GiB, 8 * GiB, GiB, 0, true), Where::out_of_memory);
  }
}

// A graph memory node past the budget under spill: host memory made outside the graph, as spill
// promises, within the managed limit.
TEST(Placement, SpillDuringCapturePastTheBudgetMakesHostMemory) {
  auto c = cfg(PolicyKind::spill);
  c.managed_limit = 4 * GiB;
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, GiB, 0, true), Where::managed);
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, GiB + 1, 3 * GiB, true), Where::out_of_memory) << "the managed limit";
  c.spill = SpillTarget::pinned;
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, GiB, 0, true), Where::pinned);
}

TEST(Placement, SwapCountsAgainstTheManagedLimit) {
  auto c = cfg(PolicyKind::swap);
  c.managed_limit = 4 * GiB;
  EXPECT_EQ(where(c, 8 * GiB, 0, GiB, 3 * GiB), Where::swap);
  EXPECT_EQ(where(c, 8 * GiB, 0, GiB + 1, 3 * GiB), Where::out_of_memory);
  // The refusal names the variable and why memory on the device counted.
  const Placement p = place(c, {8 * GiB, 0}, 3 * GiB, {GiB + 1, false, false});
  EXPECT_NE(std::string(p.reason).find("GPUMEMSHIM_MANAGED_LIMIT"), std::string::npos) << p.reason;
  EXPECT_NE(std::string(p.reason).find("on the device or not"), std::string::npos) << p.reason;
  EXPECT_STREQ(where_name(Where::swap), "swap");
}

TEST(Placement, AutoMakesMovableMemoryAndPlacesLargeAllocationsAsSpillDoes) {
  auto c = cfg(PolicyKind::auto_);
  EXPECT_EQ(where(c, 8 * GiB, 0, GiB), Where::swap);
  EXPECT_EQ(where(c, 8 * GiB, 0, 4 * GiB), Where::device) << "over a quarter, and it fits: ordinary memory";
  EXPECT_EQ(where(c, 8 * GiB, 6 * GiB, 2 * GiB + 1), Where::managed) << "over a quarter and does not fit: streamed";
  EXPECT_EQ(where(c, 8 * GiB, 7 * GiB, 2 * GiB), Where::swap) << "a quarter exactly: movable, evicting others";
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, MiB), Where::swap) << "small ones over budget are movable";
  EXPECT_EQ(where(c, 8 * GiB, 0, MiB - 1), Where::device) << "below the minimum size, within budget: ordinary";
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, 4096), Where::swap) << "below the minimum size, over budget: movable";
  EXPECT_EQ(where(c, 8 * GiB, 0, 3 * GiB, 0, false, true), Where::managed) << "the driver refused: the host";
  EXPECT_EQ(where(c, 8 * GiB, 0, GiB, 0, true), Where::device) << "never movable during capture";
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, GiB, 0, true), Where::device) << "a capture goes past the budget";
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, GiB, 0, true, true), Where::managed) << "not past the card: host memory";
}

TEST(Placement, AutoMakesALargeAllocationMadeAgainMovable) {
  // A step's working memory freed and made again (XLA's temporaries): movable, not read over the link.
  auto c = cfg(PolicyKind::auto_);
  PlacementRequest r;
  r.bytes = 2 * GiB + 1;
  r.recurring = true;
  EXPECT_EQ(place(c, DeviceBudget{8 * GiB, 6 * GiB}, 0, r).where, Where::swap);
  EXPECT_EQ(place(c, DeviceBudget{8 * GiB, 0}, 0, r).where, Where::device) << "within the budget: it stays";
  r.recurring = false;
  EXPECT_EQ(place(c, DeviceBudget{8 * GiB, 6 * GiB}, 0, r).where, Where::managed) << "made once: streamed";
}

TEST(Placement, AutoCountsOnlyMovableMemoryBeyondTheBudgetAgainstTheManagedLimit) {
  auto c = cfg(PolicyKind::auto_, 4 * GiB);
  // 10 GiB movable under an 8 GiB budget: at least 2 GiB of it on the host.
  EXPECT_EQ(where(c, 8 * GiB, 0, GiB, 10 * GiB), Where::swap) << "fits the budget: no host memory needed";
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, 2 * GiB, 10 * GiB), Where::swap) << "2 + 2 GiB on the host: the cap exactly";
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, 2 * GiB + 1, 10 * GiB), Where::out_of_memory);
  EXPECT_EQ(where(c, 8 * GiB, 8 * GiB, 3 * GiB, 10 * GiB), Where::out_of_memory) << "large and spilled: the cap too";
  EXPECT_EQ(where(c, 8 * GiB, 0, 3 * GiB, 10 * GiB), Where::device) << "large and within the budget: no cap";
  EXPECT_EQ(where(c, 80 * GiB, 0, GiB, 60 * GiB), Where::swap) << "a program that fits the card never meets the cap";
}

TEST(Placement, EveryDecisionHasAReason) {
  auto p = place(cfg(PolicyKind::spill), {GiB, GiB}, 0, {MiB, false, false});
  EXPECT_STREQ(p.reason, "over budget");
  EXPECT_STREQ(where_name(p.where), "managed");
}

Where vmm(const PlacementConfig& c, uint64_t limit, uint64_t used, uint64_t bytes, uint64_t managed_in_use = 0,
          bool refused = false) {
  return place_vmm(c, {limit, used}, managed_in_use, {bytes, refused}).where;
}

TEST(PlacementVmm, DeviceWithinTheBudgetHostMemoryPastItUnderEveryPolicyButOff) {
  for (PolicyKind p : {PolicyKind::spill, PolicyKind::auto_, PolicyKind::swap, PolicyKind::managed, PolicyKind::pinned}) {
    auto c = cfg(p);
    EXPECT_EQ(vmm(c, 8 * GiB, 6 * GiB, 2 * GiB), Where::device) << "exactly fits, policy " << int(p);
    EXPECT_EQ(vmm(c, 8 * GiB, 6 * GiB, 2 * GiB + 2 * MiB), Where::pinned) << "one granule over, policy " << int(p);
    EXPECT_EQ(vmm(c, 8 * GiB, 0, 2 * MiB, 0, true), Where::pinned) << "the driver refused, policy " << int(p);
  }
}

TEST(PlacementVmm, OffEnforcesTheLimitAndOtherwiseLeavesTheDriversAnswer) {
  auto c = cfg(PolicyKind::off);
  EXPECT_EQ(vmm(c, GiB, GiB, 2 * MiB), Where::out_of_memory);
  EXPECT_EQ(vmm(c, GiB, 0, 2 * MiB), Where::device);
  c.limit_enforced = false;
  EXPECT_EQ(vmm(c, GiB, GiB, 2 * MiB), Where::device) << "no limit set: the budget is the card, the driver answers";
  EXPECT_EQ(vmm(c, GiB, 0, 2 * MiB, 0, true), Where::device) << "refused: the driver's own error stands";
}

TEST(PlacementVmm, TheManagedLimitCapsHostMemory) {
  auto c = cfg(PolicyKind::spill, 4 * GiB);
  EXPECT_EQ(vmm(c, GiB, GiB, GiB, 3 * GiB), Where::pinned);
  EXPECT_EQ(vmm(c, GiB, GiB, GiB + 2 * MiB, 3 * GiB), Where::out_of_memory);
  // Under auto only what the shim made beyond the budget's worth counts.
  auto a = cfg(PolicyKind::auto_, 4 * GiB);
  EXPECT_EQ(vmm(a, GiB, GiB, GiB + 2 * MiB, 3 * GiB), Where::pinned);
  EXPECT_EQ(vmm(a, GiB, GiB, 2 * GiB + 2 * MiB, 3 * GiB), Where::out_of_memory);
}

}  // namespace
}  // namespace gms::policy
