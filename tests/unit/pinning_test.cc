#include <gtest/gtest.h>

#include "policy/pinning.h"

namespace gms::policy {
namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

CopyRequest block_copy(uint64_t bytes, uint64_t block, uint32_t earlier = 0, bool source = true) {
  CopyRequest r;
  r.bytes = bytes;
  r.block_known = true;
  r.block_bytes = block;
  r.earlier_copies = earlier;
  r.host_is_source = source;
  r.fits_cache = true;
  return r;
}

TEST(CopyPath, RegisteredBlocksCopyPinned) {
  CopyRequest r = block_copy(MiB, MiB);
  r.block_registered = true;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::off, r), CopyPath::registered) << "already pinned is pinned";
}

TEST(CopyPath, AOneShotGigabyteIsStagedAndRegisteredOnceReused) {
  // 1 GiB once: pageable 145 ms, register 59 ms + pinned 19.5 ms, staged 32.5 ms: staged.
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(GiB, GiB)), CopyPath::staged);
  // Registration spread over the copies seen: over four (14.8 + 19.5 ms) it still loses to
  // staging; over five (11.9 + 19.5) it wins.
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(GiB, GiB, 3)), CopyPath::staged);
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(GiB, GiB, 4)), CopyPath::register_block);
  // Without staging, registering pays even once.
  CopyRequest no_stage = block_copy(GiB, GiB);
  no_stage.may_stage = false;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, no_stage), CopyPath::register_block);
}

TEST(CopyPath, AFreshDestinationIsStagedOnceAndRegisteredWhenReused) {
  // Device to host into a block never written: registering costs 503 ms per GiB.
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(GiB, GiB, 0, false)), CopyPath::staged);
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(GiB, GiB, 4, false)), CopyPath::register_block)
      << "copied into before: its pages are touched now";
}

TEST(CopyPath, SmallOneShotCopiesGoTheDriversWay) {
  // 2 MiB (below the staging minimum): pageable 0.19 ms; registering 0.41 ms + pinned 0.04 ms.
  // Spread over three copies it wins.
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(2 * MiB, 2 * MiB)), CopyPath::driver);
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(2 * MiB, 2 * MiB, 1)), CopyPath::driver);
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(2 * MiB, 2 * MiB, 2)), CopyPath::register_block);
}

TEST(CopyPath, TheS2TensorIsStagedThenRegistered) {
  // 40 MB: pageable 3.7 ms, staged 2.0 ms, registering 2.6 ms + pinned 0.73 ms: staged until the
  // registration spread over the copies seen beats it (the third copy), pinned speed after.
  for (uint32_t earlier = 0; earlier < 2; ++earlier) {
    EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(40'000'000, 40 * MiB, earlier)), CopyPath::staged)
        << earlier;
  }
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(40'000'000, 40 * MiB, 2)), CopyPath::register_block);
}

TEST(CopyPath, APoolBlockIsRegisteredForItsNextOwners) {
  // .cpu() of 40 MB into a fresh pool block: registering its untouched pages costs 19 ms against
  // 2.0 ms staged, and the block may never come back: staged. Once it has come back and been
  // copied into, its pages are touched and its registration serves the next owners too, spread
  // over 16 copies: 0.16 ms + 0.73 ms beats staging. A glibc block copied into once before is not
  // registered yet (2.5 ms / 2 + 0.73 ms).
  CopyRequest fresh = block_copy(40'000'000, 40 * MiB, 0, false);
  fresh.recycled = true;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, fresh), CopyPath::staged);
  CopyRequest back = block_copy(40'000'000, 40 * MiB, 1, false);
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, back), CopyPath::staged);
  back.recycled = true;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, back), CopyPath::register_block);
  // Below the staging minimum the driver's copy is cheap, and still loses to a registration kept.
  CopyRequest small = block_copy(2 * MiB, 2 * MiB, 1, false);
  small.recycled = true;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, small), CopyPath::register_block);
  small.fits_cache = false;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, small), CopyPath::driver) << "the cache limit still holds";
  // An upload from a pool block of up to 64 MiB: its pages are touched and its registration
  // serves the next owners too, registered at its first copy (40 MB: 2.6 ms / 16 + 0.73 ms
  // against 2.0 ms staged). A glibc block is staged.
  CopyRequest upload = block_copy(40'000'000, 40 * MiB);
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, upload), CopyPath::staged);
  upload.recycled = true;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, upload), CopyPath::register_block);
  upload.fits_cache = false;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, upload), CopyPath::staged) << "the cache limit still holds";
  // Below 16 MiB (a model's parameters, moved to the device once each) as a glibc block.
  CopyRequest param = block_copy(4 * MiB, 4 * MiB);
  param.recycled = true;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, param), CopyPath::staged);
  // Larger ones stage near the link's speed: registered as a glibc block would be, when reused.
  CopyRequest big = block_copy(GiB, GiB);
  big.recycled = true;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, big), CopyPath::staged);
  big.earlier_copies = 8;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, big), CopyPath::register_block);
}

TEST(CopyPath, ModesAndLimits) {
  CopyRequest r = block_copy(2 * MiB, 2 * MiB);
  EXPECT_EQ(choose_copy_path({}, RegisterMode::always, r), CopyPath::register_block);
  EXPECT_EQ(choose_copy_path({}, RegisterMode::off, block_copy(GiB, GiB, 5)), CopyPath::staged);
  CopyRequest no_room = block_copy(GiB, GiB, 5);
  no_room.fits_cache = false;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::always, no_room), CopyPath::staged);
  CopyRequest unknown;
  unknown.bytes = 64 * MiB;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::always, unknown), CopyPath::staged) << "no block: nothing to register";
  unknown.may_stage = false;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::always, unknown), CopyPath::driver);
  unknown.may_stage = true;
  unknown.bytes = MiB;
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, unknown), CopyPath::driver) << "below the staging minimum";
}

TEST(CopyPath, ATinyCopyFromAHugeBlockDoesNotPinTheBlock) {
  EXPECT_EQ(choose_copy_path({}, RegisterMode::auto_, block_copy(MiB, 8 * GiB, 3)), CopyPath::driver);
}

TEST(RegistrationCache, LeastRecentlyUsedLeavesFirstWithinTheLimit) {
  RegistrationCache c(100);
  EXPECT_TRUE(c.insert(1, 40).empty());
  EXPECT_TRUE(c.insert(2, 40).empty());
  EXPECT_TRUE(c.touch(1));
  auto out = c.insert(3, 40);  // 2 is now the least recently used
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], 2u);
  EXPECT_TRUE(c.contains(1));
  EXPECT_TRUE(c.contains(3));
  EXPECT_EQ(c.used(), 80u);
  auto two = c.insert(4, 100);  // needs everything
  EXPECT_EQ(two, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(c.used(), 100u);
  EXPECT_TRUE(c.insert(5, 101).empty()) << "larger than the limit: not cached, nothing evicted";
  EXPECT_FALSE(c.contains(5));
  EXPECT_TRUE(c.contains(4));
}

TEST(RegistrationCache, EraseAndReinsert) {
  RegistrationCache c(100);
  c.insert(7, 30);
  EXPECT_EQ(c.erase(7), 30u);
  EXPECT_EQ(c.erase(7), 0u);
  EXPECT_FALSE(c.touch(7));
  c.insert(8, 30);
  c.insert(8, 50);  // re-registered with another size: one entry
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.used(), 50u);
}

TEST(RegistrationCache, AdjacentBlocksAreIndependentEntries) {
  RegistrationCache c(1000);
  c.insert(10, 100);
  c.insert(11, 100);
  EXPECT_EQ(c.erase(10), 100u);
  EXPECT_TRUE(c.contains(11));
}

}  // namespace
}  // namespace gms::policy
