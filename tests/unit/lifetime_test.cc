#include "policy/lifetime.h"

#include <gtest/gtest.h>

#include <vector>

namespace gms::policy {
namespace {

constexpr uint64_t MiB = 1ull << 20;

// One iteration of a made-up training step: activations freed soon after their last use, and
// gradients made in the backward pass, used by the optimizer, freed idle in the next step.
struct Step {
  std::vector<LifetimeForecast::Key> activations, gradients;
};
Step run_step(LifetimeForecast& f, const std::vector<LifetimeForecast::Key>& previous_gradients, uint64_t idle) {
  Step s;
  for (uint64_t size : {256 * MiB, 768 * MiB, 256 * MiB, 1024 * MiB}) s.activations.push_back(f.made(size));
  for (LifetimeForecast::Key k : previous_gradients) f.ended(k, idle);  // zero_grad after the forward
  for (uint64_t size : {128 * MiB, 96 * MiB, 32 * MiB}) {
    s.gradients.push_back(f.made(size));
    f.made(256 * MiB);  // an activation gradient between them
  }
  for (LifetimeForecast::Key k : s.activations) f.ended(k, 1);
  return s;
}

TEST(Lifetime, LearnsWhichAllocationsOfALoopDieIdle) {
  LifetimeForecast f;
  Step s = run_step(f, {}, 0);
  for (auto k : s.gradients) EXPECT_FALSE(f.dies_idle(k)) << "nothing learned yet";
  s = run_step(f, s.gradients, 40);
  s = run_step(f, s.gradients, 40);
  for (auto k : s.gradients) EXPECT_TRUE(f.dies_idle(k)) << "two idle deaths of the same allocation";
  for (auto k : s.activations) EXPECT_FALSE(f.dies_idle(k));
}

TEST(Lifetime, AKeyIsTheSizeAndTheSizesBeforeIt) {
  LifetimeForecast f;
  const auto a = f.made(8 * MiB);
  const auto b = f.made(8 * MiB);
  EXPECT_NE(a, b) << "same size, different sizes before";
  LifetimeForecast g;
  EXPECT_EQ(g.made(8 * MiB), a) << "the same history, the same key";
  EXPECT_EQ(g.made(8 * MiB), b);
  EXPECT_NE(g.made(16 * MiB), f.made(8 * MiB));
}

TEST(Lifetime, TwoBitCountNeedsTwoIdleDeathsAndForgetsSlowly) {
  LifetimeConfig c;
  c.idle = 10;
  LifetimeForecast f(c);
  const auto k = f.made(4 * MiB);
  f.ended(k, 10);
  EXPECT_FALSE(f.dies_idle(k)) << "one is not a habit";
  f.ended(k, 100);
  EXPECT_TRUE(f.dies_idle(k));
  f.ended(k, 500);  // saturates at three
  f.ended(k, 9);
  EXPECT_TRUE(f.dies_idle(k)) << "one quick death after three idle ones";
  f.ended(k, 0);
  EXPECT_FALSE(f.dies_idle(k));
}

TEST(Lifetime, QuickDeathsKeepNoKeys) {
  LifetimeForecast f;
  for (uint64_t i = 1; i <= 100; ++i) f.ended(f.made(i * MiB), 0);
  EXPECT_EQ(f.keys(), 0u) << "a program of varying sizes fills nothing";
  const auto k = f.made(3 * MiB);
  f.ended(k, 100);
  EXPECT_EQ(f.keys(), 1u);
  f.ended(k, 0);
  EXPECT_EQ(f.keys(), 0u) << "counted back down to nothing: gone";
}

TEST(Lifetime, TheTableStartsOverWhenFull) {
  LifetimeConfig c;
  c.capacity = 4;
  LifetimeForecast f(c);
  std::vector<LifetimeForecast::Key> keys;
  for (uint64_t i = 1; i <= 4; ++i) keys.push_back(f.made(i * MiB));
  for (auto k : keys) f.ended(k, 100), f.ended(k, 100);
  EXPECT_EQ(f.keys(), 4u);
  EXPECT_TRUE(f.dies_idle(keys[0]));
  const auto k = f.made(99 * MiB);
  f.ended(k, 100);
  EXPECT_EQ(f.keys(), 1u) << "a fifth key cleared the table";
  EXPECT_FALSE(f.dies_idle(keys[0]));
}

}  // namespace
}  // namespace gms::policy
