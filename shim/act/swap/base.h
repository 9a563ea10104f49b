#pragma once
// What every part of movable memory shares (act/swap.h; the parts: docs/design/layers.md): the
// one lock that guards every part's state, the bound on devices, and the statistics' timer.
#include <cstdint>
#include <mutex>

#include "core/guard.h"
#include "core/ledger.h"
#include "core/runtime.h"
#include "driver/calls.h"
#include "trace/trace.h"

namespace gms::act::swap {

constexpr int kMaxDevices = DeviceLedger::kMaxDevices;
constexpr uint64_t kGranule = 2ull << 20;  // cuMemCreate's granularity on every current GPU

// Guards the state of every part. Held across a round of moves: its waits are synchronous anyway.
inline std::mutex& mu() {
  static NoDestructor<std::mutex> m;
  return *m;
}

// Adds the time from construction to destruction to a statistic.
class Timed {
 public:
  explicit Timed(Timing t) : t_(t), t0_(trace::monotonic_ns()) {}
  ~Timed() { runtime_stats().time(t_, trace::monotonic_ns() - t0_); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  Timing t_;
  uint64_t t0_;
};

// A call from outside that changes movable memory, while it lives: the shim's guard, relaxed
// capture (driver/calls.h), its time in the statistics (the wait for the lock included), the lock.
class Guarded {
 public:
  explicit Guarded(Timing t) : timed_(t), lock_(mu()) {}
  std::unique_lock<std::mutex>& lock() { return lock_; }

 private:
  ShimScope scope_;
  driver::RelaxedCapture relaxed_;
  Timed timed_;
  std::unique_lock<std::mutex> lock_;
};

inline CUresult sync_context() {
  Timed t(Timing::swap_wait_ns);
  return driver::call_real(GMS_REAL(cuCtxSynchronize));
}

inline CUresult wait_stream(CUstream stream, bool per_thread) {
  Timed t(Timing::swap_wait_ns);
  return driver::sync_stream(stream, per_thread);
}

}  // namespace gms::act::swap
