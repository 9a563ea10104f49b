// The observation core, driven directly as the hooks drive it.
#include <gtest/gtest.h>

#include "observe/observe.h"
#include "core/runtime.h"

namespace gms {
namespace {

class ObserveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime_stats().reset();
    for (int i = 0; i < kMemKindCount; ++i) runtime_stats().live_sub(static_cast<MemKind>(i), ~0ull);
    cuda_regions().clear();
    host_blocks().clear();
    host_registrations().clear();
  }
  Stats& s = runtime_stats();
};

observe::PtrKind driver_says_device(uintptr_t) { return observe::PtrKind::device; }
observe::PtrKind driver_says_managed(uintptr_t) { return observe::PtrKind::managed; }

TEST_F(ObserveTest, AllocAndFreeKeepRegistryAndLiveBytes) {
  observe::region_alloc(Family::mem_alloc, true, 0x7000000, 4096, MemKind::device, Origin::cuMemAlloc, 0, 0);
  observe::region_alloc(Family::mem_alloc, false, 0, 1 << 20, MemKind::device, Origin::cuMemAlloc, -1, 0);
  EXPECT_EQ(s.family(Family::mem_alloc).calls, 2u);
  EXPECT_EQ(s.family(Family::mem_alloc).errors, 1u);
  EXPECT_EQ(s.live(MemKind::device), 4096u);
  ASSERT_TRUE(cuda_regions().find(0x7000fff));
  EXPECT_EQ(cuda_regions().find(0x7000fff)->device, 0);
  observe::region_free(Family::mem_free, true, 0x7000000);
  EXPECT_EQ(s.family(Family::mem_free).bytes, 4096u);
  EXPECT_EQ(s.live(MemKind::device), 0u);
  EXPECT_EQ(s.peak(MemKind::device), 4096u);
  EXPECT_EQ(cuda_regions().count(), 0u);
  observe::region_free(Family::mem_free, true, 0x7000000);
  EXPECT_EQ(s.anomalies(Anomaly::unknown_frees), 1u) << "double free is not the shim's to hide";
}

TEST_F(ObserveTest, CopiesAreClassifiedByDirectionAndHostKind) {
  using observe::CopyEnd;
  using observe::Side;
  observe::region_alloc(Family::host_alloc, true, 0x10000, 0x1000, MemKind::pinned_host, Origin::cuMemHostAlloc, -1, 0);
  observe::region_alloc(Family::mem_alloc_managed, true, 0x20000, 0x1000, MemKind::managed, Origin::cuMemAllocManaged, 0, 1);
  observe::host_register(true, 0x30000, 0x1000, 0);

  observe::copy_one({Side::device, 0x9000000}, {Side::host, 0x50000}, 10, false, nullptr);   // pageable htod
  observe::copy_one({Side::device, 0x9000000}, {Side::host, 0x10010}, 20, false, nullptr);   // pinned htod
  observe::copy_one({Side::host, 0x30800}, {Side::device, 0x9000000}, 30, false, nullptr);   // registered dtoh
  observe::copy_one({Side::unified, 0x20100}, {Side::unified, 0x9000000}, 40, false, driver_says_device);  // to managed: dtoh
  observe::copy_one({Side::device, 0x9000000}, {Side::device, 0x9100000}, 50, false, nullptr);
  observe::copy_one({Side::device, 0x9000000}, {Side::device, 0xa100000}, 60, true, nullptr);
  observe::copy_one({Side::unified, 0x60000}, {Side::unified, 0x61000}, 70, false, nullptr);  // unknown: host

  EXPECT_EQ(s.direction(Direction::htod).bytes, 10u + 20u);
  EXPECT_EQ(s.direction(Direction::dtoh).bytes, 30u + 40u);
  EXPECT_EQ(s.direction(Direction::dtod).bytes, 50u);
  EXPECT_EQ(s.direction(Direction::peer).bytes, 60u);
  EXPECT_EQ(s.direction(Direction::htoh).bytes, 70u);
  EXPECT_EQ(s.host_kind(HostKind::pageable).bytes, 10u + 70u);
  EXPECT_EQ(s.host_kind(HostKind::pinned).bytes, 20u + 30u);
  EXPECT_EQ(s.host_kind(HostKind::managed).bytes, 40u);
}

TEST_F(ObserveTest, UnknownUnifiedPointerAsksTheDriver) {
  using observe::Side;
  EXPECT_EQ(observe::classify({Side::unified, 0x1234}, driver_says_managed), observe::PtrKind::managed);
  EXPECT_EQ(observe::classify({Side::unified, 0x1234}, nullptr), observe::PtrKind::pageable);
  EXPECT_EQ(observe::classify({Side::host, 0x1234}, driver_says_managed), observe::PtrKind::pageable)
      << "a typed host side is never sent to the driver";
  EXPECT_EQ(observe::classify({Side::array, 0}, nullptr), observe::PtrKind::device);
}

TEST_F(ObserveTest, HostBlocksAndRangesGone) {
  observe::host_block_alloc(0x100000, 0x40000, Origin::mmap_anon);
  observe::host_block_alloc(0x200000, 0x100000, Origin::malloc);
  EXPECT_EQ(s.live(MemKind::host_block), 0x140000u);
  // munmap of the middle of the mapping splits it; the live bytes drop by what went away.
  observe::host_range_gone(0x110000, 0x120000);
  EXPECT_EQ(s.live(MemKind::host_block), 0x130000u);
  EXPECT_EQ(host_blocks().count(), 3u);
  auto freed = observe::host_block_free(0x200000);
  ASSERT_TRUE(freed);
  EXPECT_EQ(freed->size, 0x100000u);
  EXPECT_FALSE(observe::host_block_free(0x200000));
  observe::host_block_alloc(0x200000, 0x100000, Origin::malloc);
  auto again = observe::host_block_free(0x200000);
  ASSERT_TRUE(again);
  EXPECT_NE(again->serial, freed->serial) << "a new block at the same address is another block";
  EXPECT_EQ(s.family(Family::host_block_alloc).calls, 3u);
  EXPECT_EQ(s.family(Family::host_block_free).bytes, 0x10000u + 0x100000u + 0x100000u);
}

TEST_F(ObserveTest, RegistrationsComeAndGo) {
  observe::host_register(true, 0x500000, 0x2000, 1);
  observe::host_register(false, 0x600000, 0x2000, 0);
  EXPECT_EQ(host_registrations().count(), 1u);
  EXPECT_EQ(s.live(MemKind::registered_host), 0x2000u);
  observe::host_unregister(true, 0x500000);
  EXPECT_EQ(host_registrations().count(), 0u);
  EXPECT_EQ(s.family(Family::host_unregister).bytes, 0x2000u);
  EXPECT_EQ(s.family(Family::host_register).errors, 1u);
}

TEST_F(ObserveTest, VmmUnmapTrimsMappings) {
  observe::region_alloc(Family::vmm, true, 0x8000000, 0x400000, MemKind::vmm, Origin::cuMemMap, 0, 0);
  observe::vmm_unmap(true, 0x8000000, 0x200000);
  EXPECT_EQ(s.live(MemKind::vmm), 0x200000u);
  EXPECT_TRUE(cuda_regions().find(0x8200000));
  EXPECT_FALSE(cuda_regions().find(0x8000000));
}

}  // namespace
}  // namespace gms
