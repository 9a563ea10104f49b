#pragma once
// Which allocations the program frees after leaving them untouched for long: the residency planner
// evicts memory that holds only those last.
//
// Why: PyTorch's usual training step (torchvision's reference scripts, tests/gpu/placement) frees
// the gradients with zero_grad after the forward pass, so they sit unused from the previous step's
// optimizer to their free, through the whole forward pass, when room is short. Least-recently-used
// eviction copies them to the host, only for the program to drop them there. Keeping them and
// evicting something else moves as many bytes out during the forward pass, but the room they leave
// at their free costs no copy. On the H100 the GPT-style benchmark (tests/gpu/placement/torch_gpt.py)
// under swap spent 0.9 GiB of its 5.8 GiB of copies to the host per step on them; the same program
// with zero_grad moved before the forward pass took 231 ms a step, against 242 and 248.
//
// An allocation is known by its size and the sizes of the allocations made just before it: a loop
// makes the same allocations in the same order every iteration, while its addresses move (under
// swap, 10 of 79 per step of that benchmark were where they had been the step before). Each key
// keeps a two-bit count of how its allocations ended: up when freed after at least `idle` launches
// without a use, down otherwise; two or more forecasts an idle death.
//
// The caller measures idleness in the residency planner's launches (those that use movable memory;
// under scan order copies and memsets too) and per chunk: an allocation beside one in use never
// looks idle, which errs towards plain least-recently-used eviction.
//
// Pure bookkeeping: no CUDA, no globals, no I/O.
#include <cstdint>
#include <unordered_map>

namespace gms::policy {

struct LifetimeConfig {
  uint32_t context = 4;         // sizes of earlier allocations in a key (at most 8)
  uint64_t idle = 16;           // launches without a use before a free that make it an idle death
  uint64_t capacity = 1 << 14;  // keys kept (those with idle deaths); past it the table starts over
};

class LifetimeForecast {
 public:
  using Key = uint64_t;

  explicit LifetimeForecast(const LifetimeConfig& c = LifetimeConfig{}) : cfg_(c) {}

  // An allocation of `bytes` is made: its key (to pass to dies_idle and ended).
  Key made(uint64_t bytes);
  // Whether allocations with this key were mostly freed after sitting idle.
  bool dies_idle(Key key) const;
  // An allocation with this key was freed `idle` launches after its last use.
  void ended(Key key, uint64_t idle);

  uint64_t keys() const { return counts_.size(); }

 private:
  LifetimeConfig cfg_;
  uint64_t recent_[8] = {};  // the sizes of the last allocations, newest at next_ - 1
  uint32_t next_ = 0;
  std::unordered_map<Key, uint8_t> counts_;
};

}  // namespace gms::policy
