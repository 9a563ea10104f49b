#include "placement.h"

namespace gms::policy {
namespace {

bool fits(const DeviceBudget& b, uint64_t bytes) { return b.used <= b.limit && bytes <= b.limit - b.used; }

// The refusal names the variable, and under the experts' policies says why memory on the device
// counts: a user who set a device budget far above the step met it with the budget half empty.
Placement converted(const PlacementConfig& cfg, Where target, uint64_t managed_in_use, uint64_t bytes,
                    const char* reason) {
  if (cfg.managed_limit != 0 && (managed_in_use > cfg.managed_limit || bytes > cfg.managed_limit - managed_in_use)) {
    const bool whole = cfg.policy == PolicyKind::managed || cfg.policy == PolicyKind::pinned || cfg.policy == PolicyKind::swap;
    return {Where::out_of_memory, whole ? "GPUMEMSHIM_MANAGED_LIMIT reached (under this policy it counts every allocation it"
                                          " converts, on the device or not: raise it, or use policy auto)"
                                        : "GPUMEMSHIM_MANAGED_LIMIT reached"};
  }
  return {target, reason};
}

}  // namespace

const char* where_name(Where w) {
  switch (w) {
    case Where::device:
      return "device";
    case Where::managed:
      return "managed";
    case Where::pinned:
      return "pinned";
    case Where::swap:
      return "swap";
    case Where::out_of_memory:
      return "out_of_memory";
  }
  return "?";
}

Placement place(const PlacementConfig& cfg, const DeviceBudget& budget, uint64_t managed_in_use,
                const PlacementRequest& req) {
  bool in_budget = fits(budget, req.bytes) && !req.device_refused;
  // A graph being captured must get memory it can replay: never movable, never a prefetch. Inside
  // the budget it is an ordinary allocation (a memory node of the graph).
  if (req.capturing) {
    if (in_budget) return {Where::device, "stream capture"};
    // Under auto nothing can move during a capture to make room (the copies would be captured),
    // and most of the budget is memory that moves: the graph's memory goes past the budget, as
    // far as the card allows, rather than fail a capture that fits the card (fw_mix.py's graph).
    if (cfg.policy == PolicyKind::auto_ && !req.device_refused) return {Where::device, "stream capture past the budget"};
    // spill's promise (and auto's, once the card refuses): host memory made now, outside the
    // graph, which every replay of the graph then uses; the graph's free of it keeps it to exit.
    if (cfg.policy == PolicyKind::spill) {
      const Where target = cfg.spill == SpillTarget::pinned ? Where::pinned : Where::managed;
      return converted(cfg, target, managed_in_use, req.bytes, "stream capture over budget: made outside the graph");
    }
    if (cfg.policy == PolicyKind::auto_) {
      // Under auto the managed limit counts only what is beyond the budget, as below.
      const uint64_t on_host = managed_in_use > budget.limit ? managed_in_use - budget.limit : 0;
      return converted(cfg, Where::managed, on_host, req.bytes, "stream capture past the card: made outside the graph");
    }
    return {Where::out_of_memory, "stream capture over budget"};
  }
  switch (cfg.policy) {
    case PolicyKind::off:
      if (cfg.limit_enforced && !in_budget) return {Where::out_of_memory, "device limit"};
      return {Where::device, "policy off"};
    case PolicyKind::spill: {
      if (in_budget) return {Where::device, "within budget"};
      Where target = cfg.spill == SpillTarget::pinned ? Where::pinned : Where::managed;
      return converted(cfg, target, managed_in_use, req.bytes, "over budget");
    }
    case PolicyKind::auto_: {
      // At most the budget's worth of the movable memory is on the device.
      const uint64_t on_host = managed_in_use > budget.limit ? managed_in_use - budget.limit : 0;
      if (req.bytes >= cfg.min_size && req.bytes > budget.limit / 4 && !(req.recurring && !in_budget)) {
        if (in_budget) return {Where::device, "large: stays"};
        return converted(cfg, Where::managed, on_host, req.bytes, "over budget, large: spilled");
      }
      if (req.bytes >= cfg.min_size) {
        return in_budget ? Placement{Where::swap, "policy"} : converted(cfg, Where::swap, on_host, req.bytes, "over budget");
      }
      if (in_budget) return {Where::device, "below minimum size"};
      return converted(cfg, Where::swap, on_host, req.bytes, "over budget");
    }
    case PolicyKind::managed:
    case PolicyKind::pinned:
    case PolicyKind::swap: {
      Where target = cfg.policy == PolicyKind::pinned ? Where::pinned
                     : cfg.policy == PolicyKind::swap ? Where::swap
                                                      : Where::managed;
      if (req.bytes >= cfg.min_size) return converted(cfg, target, managed_in_use, req.bytes, "policy");
      if (in_budget) return {Where::device, "below minimum size"};
      return converted(cfg, target, managed_in_use, req.bytes, "over budget");
    }
  }
  return {Where::device, "?"};
}

Placement place_vmm(const PlacementConfig& cfg, const DeviceBudget& budget, uint64_t managed_in_use,
                    const VmmRequest& req) {
  if (fits(budget, req.bytes) && !req.device_refused) return {Where::device, "within budget"};
  if (cfg.policy == PolicyKind::off) {
    if (cfg.limit_enforced && !req.device_refused) return {Where::out_of_memory, "device limit"};
    return {Where::device, "policy off"};
  }
  uint64_t counted = managed_in_use;
  if (cfg.policy == PolicyKind::auto_) counted = managed_in_use > budget.limit ? managed_in_use - budget.limit : 0;
  return converted(cfg, Where::pinned, counted, req.bytes, "over budget: host memory");
}

}  // namespace gms::policy
