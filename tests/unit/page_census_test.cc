#include "policy/page_census.h"

#include <gtest/gtest.h>

#include <vector>

using gms::policy::PageCensus;
using gms::policy::PageMoves;

namespace {

// The page table of `pages` pages with pages [from, to) present.
std::vector<uint64_t> table(uint64_t pages, uint64_t from, uint64_t to) {
  std::vector<uint64_t> w((pages + 63) / 64);
  for (uint64_t p = from; p < to; ++p) w[p / 64] |= 1ull << (p % 64);
  return w;
}

TEST(PageCensus, FirstLookCountsNothing) {
  PageCensus c(100);
  PageMoves m = c.look(table(100, 0, 100).data(), false);
  EXPECT_EQ(m.to_gpu, 0u);
  EXPECT_EQ(m.to_cpu, 0u);
  EXPECT_EQ(c.cpu_pages(), 100u);
}

TEST(PageCensus, RoundsOfTheGpuAndTheCpu) {
  // The CPU wrote every page; each round a kernel takes them all, the CPU takes them all back.
  const uint64_t n = 1000;
  PageCensus c(n);
  c.look(table(n, 0, n).data(), false);  // before the first launch
  for (int round = 0; round < 3; ++round) {
    PageMoves gone = c.look(table(n, 0, 0).data(), true);  // after the kernel, at a synchronisation
    EXPECT_EQ(gone.to_gpu, n);
    EXPECT_EQ(gone.to_cpu, 0u);
    PageMoves back = c.look(table(n, 0, n).data(), false);  // before the next launch
    EXPECT_EQ(back.to_gpu, 0u);
    EXPECT_EQ(back.to_cpu, n);
  }
}

TEST(PageCensus, PagesTheCpuReadsBack) {
  const uint64_t n = 65536;
  PageCensus c(n);
  c.look(table(n, 0, n).data(), false);
  EXPECT_EQ(c.look(table(n, 0, 0).data(), true).to_gpu, n);
  PageMoves m = c.look(table(n, 0, 1000).data(), false);  // before the free
  EXPECT_EQ(m.to_cpu, 1000u);
  EXPECT_EQ(m.to_gpu, 0u);
}

TEST(PageCensus, PagesTheGpuMadeCountWhenTheCpuTakesThem) {
  // Never the CPU's before the kernel (the GPU made them), read by the CPU after it: migrations back.
  PageCensus c(128);
  c.look(table(128, 0, 0).data(), false);
  EXPECT_EQ(c.look(table(128, 0, 0).data(), true).to_gpu, 0u);
  EXPECT_EQ(c.look(table(128, 0, 64).data(), false).to_cpu, 64u);
}

TEST(PageCensus, PagesNoKernelUsedAreNotAway) {
  // The CPU first touching pages of a region no kernel used is not a migration.
  PageCensus c(128);
  c.look(table(128, 0, 0).data(), false);
  PageMoves m = c.look(table(128, 0, 128).data(), false);
  EXPECT_EQ(m.to_cpu, 0u);
  EXPECT_EQ(m.to_gpu, 0u);
}

TEST(PageCensus, BitsPastTheLastPageNeverCount) {
  PageCensus c(70);  // two words, six pages in the second
  std::vector<uint64_t> all(2, ~0ull);
  c.look(all.data(), false);
  EXPECT_EQ(c.cpu_pages(), 70u);
  std::vector<uint64_t> none(2, 0);
  EXPECT_EQ(c.look(none.data(), true).to_gpu, 70u);
  EXPECT_EQ(c.look(all.data(), false).to_cpu, 70u);
}

TEST(PageCensus, APageCountsOnceEachWay) {
  // Gone at one look and still gone at the next: counted once; back once, then held.
  PageCensus c(64);
  c.look(table(64, 0, 64).data(), false);
  EXPECT_EQ(c.look(table(64, 0, 32).data(), true).to_gpu, 32u);
  EXPECT_EQ(c.look(table(64, 0, 32).data(), true).to_gpu, 0u);
  EXPECT_EQ(c.look(table(64, 0, 48).data(), false).to_cpu, 16u);
  EXPECT_EQ(c.look(table(64, 0, 48).data(), false).to_cpu, 0u);
}

}  // namespace
