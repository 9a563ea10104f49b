#include "arrays.h"

#include <mutex>
#include <unordered_map>

#include "act/config.h"
#include "act/placement.h"
#include "act/residency.h"
#include "act/swap.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/runtime.h"
#include "driver/budget.h"
#include "driver/calls.h"
#include "trace/trace.h"

namespace gms::act {
namespace {

struct Array {
  uint64_t bytes = 0;
  int dev = 0;
};

struct Arrays {
  std::mutex mu;
  std::unordered_map<uint64_t, Array> of;
};

Arrays& arrays() {
  static NoDestructor<Arrays> a;
  return *a;
}

}  // namespace

bool array_may_create(uint64_t bytes, int* dev, const char* what) {
  *dev = driver::current_device();
  if (*dev < 0 || !placement_active()) return true;
  const auto& cfg = placement_config();
  const uint64_t limit = budget::limit(*dev);
  // Movable memory on the device, memory kept for reuse and prefetched managed memory all hold
  // room the array needs (swap::taken); spare memory is the room itself.
  auto within = [&] { return policy::DeviceBudget{limit, swap::taken(*dev)}; };
  policy::Placement p = policy::place_array(cfg, within(), bytes);
  if (p.where == policy::Where::out_of_memory && cfg.policy != policy::PolicyKind::off) {
    auto over = [&] { const uint64_t t = swap::taken(*dev) + bytes; return t > limit ? t - limit : 0; };
    swap::release_retired(*dev, over());
    if (over() != 0) residency_make_room(*dev, bytes);  // movable memory can leave; the array cannot
    p = policy::place_array(cfg, within(), bytes);
  }
  if (p.where != policy::Where::out_of_memory) {
    swap::fit_spares(*dev, bytes);
    return true;
  }
  Line l;
  l.str(what).str(" of ").bytes(bytes).str(" on device ").i64(*dev).str(": refused (").str(p.reason).str("; device budget ")
      .bytes(budget::limit(*dev)).str(", in use ").bytes(ledger().used(*dev)).str(")");
  log(LogLevel::info, l);
  runtime_stats().decision(Decision::refused, bytes);
  if (trace::enabled()) trace::decision("refuse", 0, bytes, *dev, p.reason);
  return false;
}

void array_created(uint64_t handle, uint64_t bytes, int dev) {
  if (dev < 0) return;
  Arrays& a = arrays();
  std::lock_guard lock(a.mu);
  auto it = a.of.find(handle);
  if (it != a.of.end()) ledger().sub_used(it->second.dev, it->second.bytes);  // its destroy went unseen
  a.of[handle] = Array{bytes, dev};
  ledger().add_used(dev, bytes);
}

bool array_room_after_refusal(int dev) {
  if (dev < 0 || !placement_active()) return false;
  const uint64_t kept = swap::retired_device_bytes(dev) + swap::spare_device_bytes(dev);
  if (kept == 0) return false;
  swap::release_retired(dev, UINT64_MAX);
  swap::trim_spares(dev, 0);
  return true;
}

ArrayBooked array_destroying(uint64_t handle) {
  Arrays& a = arrays();
  std::lock_guard lock(a.mu);
  auto it = a.of.find(handle);
  if (it == a.of.end()) return {};
  ArrayBooked b{it->second.bytes, it->second.dev};
  ledger().sub_used(b.dev, b.bytes);
  a.of.erase(it);
  return b;
}

}  // namespace gms::act
