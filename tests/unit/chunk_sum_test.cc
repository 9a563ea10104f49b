// The checksum that tells an eviction whether a chunk changed since it came in (shim/act/swap/
// sum_mix.h): the GPU adds it up in any order, and a change it missed would lose data.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "act/swap/sum_mix.h"

namespace {

using gms::act::swap::sum::lane_a;
using gms::act::swap::sum::lane_b;
using gms::act::swap::sum::salt_a;
using gms::act::swap::sum::salt_b;

std::pair<uint64_t, uint64_t> sum_of(const std::vector<uint64_t>& w, size_t from = 0, size_t to = SIZE_MAX) {
  uint64_t a = 0, b = 0;
  for (size_t i = from; i < w.size() && i < to; ++i) {
    a += lane_a(w[i], i);
    b += lane_b(w[i], i);
  }
  return {a, b};
}

std::vector<uint64_t> random_words(size_t n, uint32_t seed) {
  std::mt19937_64 g(seed);
  std::vector<uint64_t> w(n);
  for (auto& x : w) x = g();
  return w;
}

TEST(ChunkSum, AnyOrderOfAddingGivesTheSameSum) {
  const auto w = random_words(1 << 12, 1);
  const auto whole = sum_of(w);
  const auto lo = sum_of(w, 0, 1000), hi = sum_of(w, 1000);
  EXPECT_EQ(whole.first, lo.first + hi.first);
  EXPECT_EQ(whole.second, lo.second + hi.second);
}

TEST(ChunkSum, EveryOneBitChangeChangesBothLanes) {
  for (const bool zeros : {false, true}) {  // random data and a chunk of zeros (fresh memory)
    auto w = zeros ? std::vector<uint64_t>(512, 0) : random_words(512, 2);
    const auto before = sum_of(w);
    for (size_t i = 0; i < w.size(); i += 7) {
      for (int bit : {0, 1, 31, 32, 63}) {
        w[i] ^= 1ull << bit;
        const auto after = sum_of(w);
        EXPECT_NE(after.first, before.first) << i << " " << bit;
        EXPECT_NE(after.second, before.second) << i << " " << bit;
        w[i] ^= 1ull << bit;
      }
    }
    EXPECT_EQ(sum_of(w), before);
  }
}

TEST(ChunkSum, MovedWordsChangeTheSum) {
  auto w = random_words(256, 3);
  const auto before = sum_of(w);
  std::swap(w[10], w[200]);  // the same words, in other places
  EXPECT_NE(sum_of(w), before);
  std::swap(w[10], w[200]);
  std::vector<uint64_t> shifted(w.begin() + 1, w.end());  // everything one word down
  shifted.push_back(w[0]);
  EXPECT_NE(sum_of(shifted), before);
}

TEST(ChunkSum, TheSameWordsUnderAnotherSaltDoNotMatch) {
  // A sum that lands late in a slot reused since (its chunk's, under its salt) must not pass for
  // the sum of another chunk that happens to hold the same words (zeros, say).
  const auto w = std::vector<uint64_t>(512, 0);
  const auto s = sum_of(w);
  for (uint64_t salt = 1; salt < 64; ++salt) {
    EXPECT_NE(s.first + salt_a(salt), s.first + salt_a(salt + 1));
    EXPECT_NE(s.second + salt_b(salt), s.second + salt_b(salt + 1));
  }
}

TEST(ChunkSum, ManyRandomChangesAllSeen) {
  std::mt19937_64 g(4);
  auto w = random_words(1024, 5);
  const auto before = sum_of(w);
  for (int k = 0; k < 2000; ++k) {
    auto v = w;
    const int changes = 1 + static_cast<int>(g() % 8);
    for (int c = 0; c < changes; ++c) v[g() % v.size()] += 1 + g() % 1000;
    if (v == w) continue;
    const auto after = sum_of(v);
    EXPECT_TRUE(after.first != before.first || after.second != before.second) << k;
  }
}

}  // namespace
