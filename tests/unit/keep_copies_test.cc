// When chunks coming in keep their host copy (policy/keep_copies.h): while a quarter of them leave
// unchanged; else a pause, then another try.
#include "policy/keep_copies.h"

#include <gtest/gtest.h>

namespace {

using gms::policy::KeepCopies;

// Runs `windows` windows of copies in; in each, `unchanged_per_window` kept copies leave unchanged
// (only while copies are kept). Returns how many copies in kept their copy.
uint32_t run(KeepCopies& k, uint32_t windows, uint32_t unchanged_per_window) {
  uint32_t kept = 0;
  for (uint32_t w = 0; w < windows; ++w) {
    uint32_t left = 0;
    for (uint32_t i = 0; i < KeepCopies::kWindow; ++i) {
      // The evictions come before the window's last copy in, which makes the verdict.
      if (i + 1 < KeepCopies::kWindow && left < unchanged_per_window && k.keeping()) {
        k.left_unchanged();
        ++left;
      }
      kept += k.keep_next() ? 1 : 0;
    }
  }
  return kept;
}

TEST(KeepCopies, KeptWhileChunksLeaveAsTheyCame) {
  KeepCopies k;  // decoding: nearly every weight leaves as it came in
  EXPECT_EQ(run(k, 40, KeepCopies::kWindow - 10), 40 * KeepCopies::kWindow);
  EXPECT_TRUE(k.keeping());
}

TEST(KeepCopies, AQuarterLeavingUnchangedIsEnough) {
  KeepCopies k;
  EXPECT_EQ(run(k, 10, KeepCopies::kWindow / 4), 10 * KeepCopies::kWindow);
  KeepCopies less;
  run(less, 1, KeepCopies::kWindow / 4 - 1);
  EXPECT_FALSE(less.keeping());
}

// Every kept chunk leaves with `same` of its 32 pieces unchanged; whether copies are still kept
// after `windows` windows.
bool keeping_with_pieces(uint32_t same, uint32_t windows) {
  KeepCopies k;
  for (uint32_t w = 0; w < windows; ++w) {
    for (uint32_t i = 0; i < KeepCopies::kWindow; ++i) {
      if (i + 1 < KeepCopies::kWindow && k.keeping()) k.left_unchanged(same, 32);
      k.keep_next();
    }
  }
  return k.keeping();
}

TEST(KeepCopies, AChunkCountsForTheShareOfItsPiecesLeftUnchanged) {
  // Training: chunks whose weights stay the same beside written activations pay by their pieces.
  EXPECT_TRUE(keeping_with_pieces(16, 4));
  EXPECT_TRUE(keeping_with_pieces(9, 4));   // over a quarter
  EXPECT_FALSE(keeping_with_pieces(7, 1));  // less: paused
  EXPECT_FALSE(keeping_with_pieces(0, 1));
}

TEST(KeepCopies, PausedWhereNoneLeavesUnchangedThenTriedAgain) {
  KeepCopies k;  // training: chunks written, or brought back once and freed
  EXPECT_EQ(run(k, 1, 0), KeepCopies::kWindow);  // the first window keeps them all: no verdict yet
  EXPECT_FALSE(k.keeping());
  EXPECT_EQ(run(k, KeepCopies::kPauseWindows, 0), 0u);
  EXPECT_TRUE(k.keeping());  // tried again: the program may have moved on
  EXPECT_EQ(run(k, 1, KeepCopies::kWindow), KeepCopies::kWindow);
  EXPECT_TRUE(k.keeping());  // and now copies pay: kept on
  EXPECT_EQ(run(k, 3, KeepCopies::kWindow), 3 * KeepCopies::kWindow);
}

TEST(KeepCopies, OneWindowAPauseKeptWhereCopiesNeverPay) {
  KeepCopies k;
  const uint32_t cycle = KeepCopies::kPauseWindows + 1, windows = cycle * 6;
  EXPECT_EQ(run(k, windows, 0), windows / cycle * KeepCopies::kWindow);
}

}  // namespace
