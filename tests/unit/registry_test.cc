#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/registry.h"

namespace gms {
namespace {

Region make(uintptr_t base, size_t size, MemKind kind = MemKind::device) {
  Region r;
  r.base = base;
  r.size = size;
  r.kind = kind;
  return r;
}

TEST(Registry, FindsByAnyAddressInside) {
  Registry reg;
  EXPECT_EQ(reg.insert(make(0x1000, 0x1000)), 0u);
  EXPECT_EQ(reg.insert(make(0x3000, 0x800)), 0u);
  EXPECT_FALSE(reg.find(0xfff));
  ASSERT_TRUE(reg.find(0x1000));
  EXPECT_EQ(reg.find(0x1fff)->base, 0x1000u);
  EXPECT_FALSE(reg.find(0x2000)) << "end is exclusive";
  EXPECT_EQ(reg.find(0x37ff)->base, 0x3000u);
  EXPECT_FALSE(reg.find(0x3800));
  EXPECT_EQ(reg.count(), 2u);
}

TEST(Registry, AdjacentRegionsDoNotOverlap) {
  Registry reg;
  reg.insert(make(0x1000, 0x1000));
  EXPECT_EQ(reg.insert(make(0x2000, 0x1000)), 0u);
  EXPECT_EQ(reg.insert(make(0x0, 0x1000)), 0u);
  EXPECT_EQ(reg.count(), 3u);
  EXPECT_EQ(reg.find(0x1fff)->base, 0x1000u);
  EXPECT_EQ(reg.find(0x2000)->base, 0x2000u);
}

TEST(Registry, OverlappingInsertReplacesStaleRegions) {
  Registry reg;
  reg.insert(make(0x1000, 0x1000));
  reg.insert(make(0x3000, 0x1000));
  reg.insert(make(0x6000, 0x1000));
  // Covers the tail of the first and all of the second: both were never freed, so both are stale.
  EXPECT_EQ(reg.insert(make(0x1800, 0x2000)), 2u);
  EXPECT_EQ(reg.count(), 2u);
  EXPECT_EQ(reg.find(0x1900)->base, 0x1800u);
  EXPECT_EQ(reg.find(0x6000)->base, 0x6000u);
  EXPECT_FALSE(reg.find(0x1000));
}

TEST(Registry, EraseIsByExactBase) {
  Registry reg;
  reg.insert(make(0x1000, 0x1000, MemKind::managed));
  EXPECT_FALSE(reg.erase(0x1800)) << "an interior pointer is not the allocation";
  auto r = reg.erase(0x1000);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, MemKind::managed);
  EXPECT_EQ(reg.count(), 0u);
  EXPECT_FALSE(reg.erase(0x1000));
}

TEST(Registry, EraseRangeTrimsAndSplits) {
  Registry reg;
  reg.insert(make(0x10000, 0x10000, MemKind::host_block));
  std::vector<Region> removed;
  // munmap of a middle page: the region splits in two.
  size_t bytes = reg.erase_range(0x14000, 0x15000, [&](const Region& r) { removed.push_back(r); });
  EXPECT_EQ(bytes, 0x1000u);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].base, 0x14000u);
  EXPECT_EQ(removed[0].kind, MemKind::host_block);
  EXPECT_EQ(reg.count(), 2u);
  EXPECT_EQ(reg.find(0x13fff)->size, 0x4000u);
  EXPECT_EQ(reg.find(0x15000)->base, 0x15000u);
  EXPECT_EQ(reg.find(0x15000)->size, 0xb000u);
  EXPECT_FALSE(reg.find(0x14800));
  // A range over the end of the first piece and the start of the second, plus empty space.
  EXPECT_EQ(reg.erase_range(0x12000, 0x16000), 0x3000u);
  EXPECT_EQ(reg.find(0x11fff)->size, 0x2000u);
  EXPECT_EQ(reg.find(0x16000)->base, 0x16000u);
  // Everything.
  EXPECT_EQ(reg.erase_range(0, ~uintptr_t{0}), 0x2000u + 0xa000u);
  EXPECT_EQ(reg.count(), 0u);
  EXPECT_EQ(reg.erase_range(5, 5), 0u) << "empty range";
}

TEST(Registry, EraseRangeCoveringSeveralRegions) {
  Registry reg;
  for (uintptr_t i = 0; i < 10; ++i) reg.insert(make(0x1000 * (2 * i + 1), 0x1000));
  size_t pieces = 0;
  EXPECT_EQ(reg.erase_range(0x2800, 0xd800, [&](const Region&) { ++pieces; }), 0x1000u * 5 + 0x800u);
  EXPECT_EQ(pieces, 6u);
  EXPECT_EQ(reg.count(), 5u);
}

TEST(Registry, ConcurrentInsertEraseFindFromSixteenThreads) {
  Registry reg;
  constexpr int kThreads = 16;
  constexpr int kPerThread = 2000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        uintptr_t base = (static_cast<uintptr_t>(t) << 32) + static_cast<uintptr_t>(i) * 0x10000;
        reg.insert(make(base, 0x8000));
        auto f = reg.find(base + 0x7fff);
        if (!f || f->base != base) wrong.fetch_add(1);
        if (i % 2 == 0 && !reg.erase(base)) wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(reg.count(), static_cast<size_t>(kThreads * kPerThread / 2));
  size_t seen = 0;
  reg.for_each([&](const Region& r) {
    ++seen;
    EXPECT_EQ(r.size, 0x8000u);
  });
  EXPECT_EQ(seen, reg.count());
}

TEST(Registry, Names) {
  EXPECT_STREQ(mem_kind_name(MemKind::managed), "managed");
  EXPECT_STREQ(mem_kind_name(MemKind::host_block), "host_block");
  EXPECT_STREQ(origin_name(Origin::cuMemAllocFromPoolAsync), "cuMemAllocFromPoolAsync");
  EXPECT_STREQ(origin_name(Origin::mremap), "mremap");
}

}  // namespace
}  // namespace gms
