#include "act/quiet.h"

#include <atomic>

#include "act/made_again.h"
#include "core/ledger.h"
#include "core/runtime.h"
#include "trace/trace.h"

namespace gms::act::quiet {
namespace {
constexpr int kMaxDevices = DeviceLedger::kMaxDevices;
std::atomic<bool> g_stirred[kMaxDevices] = {};
std::atomic<uint64_t> g_launches{0};
}  // namespace

bool is(int dev) {
  return options().swap_quiet.value && dev >= 0 && dev < kMaxDevices && !g_stirred[dev].load(std::memory_order_relaxed);
}

bool unscanned(int dev) { return is(dev) && !trace::enabled(); }

void stir(int dev) {
  if (dev >= 0 && dev < kMaxDevices) g_stirred[dev].store(true, std::memory_order_relaxed);
}

void count_launch() {
  g_launches.fetch_add(1, std::memory_order_relaxed);
  unscanned_work();  // it may use every large allocation: their uses count (act/made_again.h)
}

uint64_t launches() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace gms::act::quiet
