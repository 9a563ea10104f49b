// policy/pointer_tables.h: what device memory holds addresses of movable memory, from the copies
// and kernels that wrote it, and what a kernel given such a table reaches.
#include "policy/pointer_tables.h"

#include <gtest/gtest.h>

#include <vector>

namespace gms::policy {
namespace {

using Addr = PointerTables::Addr;
constexpr Addr kTable = 0x7f0000000000;  // an 80-byte table in ordinary device memory
constexpr Addr kOther = 0x7f0000100000;
constexpr Addr kA = 0x7e0000000000, kB = 0x7e0004000000, kC = 0x7e0008000000;  // movable memory

std::vector<Addr> v(std::initializer_list<Addr> a) { return a; }

TEST(PointerTables, CopyFromHostStoresExactlyItsAddresses) {
  PointerTables t;
  EXPECT_EQ(t.reach(kTable), nullptr);
  t.stored(kTable, 80, 0, 24, {{0, kB}, {16, kA}});
  const PointerTables::Reach* r = t.reach(kTable + 8);  // anywhere inside the table
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->stored, v({kA, kB}));
  EXPECT_TRUE(r->maybe.empty());
  EXPECT_FALSE(r->anything);
  EXPECT_EQ(t.reach(kTable + 80), nullptr);  // past its end
  EXPECT_EQ(t.reach(kTable - 1), nullptr);
}

TEST(PointerTables, ACopyReplacesOnlyTheBytesItWrites) {
  PointerTables t;
  t.stored(kTable, 80, 0, 16, {{0, kA}, {8, kB}});
  t.stored(kTable, 80, 8, 8, {{8, kC}});  // kB's word overwritten
  EXPECT_EQ(t.reach(kTable)->stored, v({kA, kC}));
  t.stored(kTable, 80, 0, 8, {});  // numbers, not addresses
  EXPECT_EQ(t.reach(kTable)->stored, v({kC}));
  t.stored(kTable, 80, 8, 8, {});
  EXPECT_EQ(t.reach(kTable), nullptr) << "a table with nothing left is forgotten";
  t.stored(kOther, 80, 0, 80, {});
  EXPECT_TRUE(t.empty()) << "a copy with no addresses makes no table";
}

TEST(PointerTables, KernelWritesOnlyOrderAndAreReplacedByAWholeCopy) {
  PointerTables t;
  t.may_hold(kTable, 80, {kA, kB});
  t.may_hold(kTable, 80, {kB, kC});
  const PointerTables::Reach* r = t.reach(kTable);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->stored.empty());
  EXPECT_EQ(r->maybe, v({kA, kB, kC}));
  t.stored(kTable, 80, 0, 8, {{0, kA}});  // part of it: what kernels wrote may still be there
  EXPECT_EQ(t.reach(kTable)->maybe.size(), 3u);
  EXPECT_EQ(t.reach(kTable)->stored, v({kA}));
  t.stored(kTable, 80, 0, 80, {{0, kC}});  // all of it
  EXPECT_TRUE(t.reach(kTable)->maybe.empty());
  EXPECT_EQ(t.reach(kTable)->stored, v({kC}));
}

TEST(PointerTables, LargeBuffersAreNotTablesOfKernels) {
  PointerTables t;
  t.may_hold(kTable, (1ull << 20) + 1, {kA});
  EXPECT_TRUE(t.empty());
  t.may_hold(kTable, 1ull << 20, {kA});
  EXPECT_FALSE(t.empty());
}

TEST(PointerTables, MemsetAndFreeForget) {
  PointerTables t;
  t.stored(kTable, 80, 0, 16, {{0, kA}, {8, kB}});
  t.may_hold(kTable, 80, {kC});
  t.cleared(kTable, 0, 8);
  EXPECT_EQ(t.reach(kTable)->stored, v({kB}));
  EXPECT_EQ(t.reach(kTable)->maybe, v({kC}));
  t.cleared(kTable, 0, 80);
  EXPECT_EQ(t.reach(kTable), nullptr);
  t.stored(kTable, 80, 0, 8, {{0, kA}});
  t.freed(kTable);
  EXPECT_TRUE(t.empty());
}

TEST(PointerTables, DeviceCopiesCarryEntriesShifted) {
  PointerTables t;
  t.stored(kTable, 80, 0, 24, {{0, kA}, {8, kB}, {16, kC}});
  t.may_hold(kTable, 80, {kC});
  t.copied(kOther, 64, 32, kTable, 8, 16);  // kB and kC's words, to offsets 32 and 40
  const PointerTables::Reach* r = t.reach(kOther + 63);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->stored, v({kB, kC}));
  EXPECT_EQ(r->maybe, v({kC}));
  t.copied(kOther, 64, 32, kOther + 4096, 0, 8);  // from a buffer with no addresses: kB's word gone
  EXPECT_EQ(t.reach(kOther)->stored, v({kC}));
}

TEST(PointerTables, AnotherAllocationAtTheSameAddressStartsEmpty) {
  // An 80-byte table freed unseen and a 24-byte one made at its address: a copy of three addresses
  // into the new one leaves none of the old one's, and kernels' writes to it start afresh.
  PointerTables t;
  t.stored(kTable, 80, 0, 80, {{0, kA}, {40, kB}, {72, kC}});
  t.stored(kTable, 24, 0, 24, {{0, kC}});
  EXPECT_EQ(t.reach(kTable)->stored, v({kC}));
  uint64_t size = 0;
  t.reach(kTable, nullptr, &size);
  EXPECT_EQ(size, 24u);
  t.may_hold(kTable, 16, {kA});
  EXPECT_TRUE(t.reach(kTable)->stored.empty());
  EXPECT_EQ(t.reach(kTable)->maybe, v({kA}));
}

TEST(PointerTables, NewsAreWordsTheTableDidNotHold) {
  // A kernel that reads a table a copy filled leaves it as it was: no news, not a writer.
  PointerTables t;
  EXPECT_FALSE(t.in_span(kTable));
  t.stored(kTable, 80, 0, 16, {{0, kA}, {8, kB}});
  EXPECT_TRUE(t.in_span(kTable + 79));
  EXPECT_FALSE(t.in_span(kTable + 80));
  EXPECT_EQ(t.news(kTable, 80, {{0, kA}, {8, kB}}), 0u);
  EXPECT_EQ(t.news(kTable, 80, {{0, kA}, {8, kC}}), 1u);
  EXPECT_EQ(t.news(kTable, 80, {{16, kA}}), 1u);
  EXPECT_EQ(t.news(kTable, 24, {{0, kA}}), 1u) << "another allocation at the address";
  EXPECT_EQ(t.news(kOther, 80, {{0, kA}}), 1u);
}

TEST(PointerTables, TooManyAddressesReachAnything) {
  PointerTablesConfig cfg;
  cfg.max_pointers = 4;
  PointerTables t(cfg);
  std::vector<PointerTables::Word> words;
  for (uint64_t k = 0; k < 5; ++k) words.push_back({8 * k, kA + (k << 26)});
  t.stored(kTable, 80, 0, 40, words);
  ASSERT_NE(t.reach(kTable), nullptr);
  EXPECT_TRUE(t.reach(kTable)->anything);
  t.stored(kTable, 80, 0, 80, {{0, kA}});  // overwritten whole: known again
  EXPECT_FALSE(t.reach(kTable)->anything);
  for (uint64_t k = 0; k < 6; ++k) t.may_hold(kTable, 80, {kB + (k << 26)});
  EXPECT_TRUE(t.reach(kTable)->anything);
  t.cleared(kTable, 0, 80);
  EXPECT_EQ(t.reach(kTable), nullptr);
}

}  // namespace
}  // namespace gms::policy
