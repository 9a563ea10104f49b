#include "config.h"

#include <unistd.h>

#include "core/runtime.h"

namespace gms::act {
namespace {

policy::PlacementConfig make_config() {
  const Options& o = options();
  policy::PlacementConfig c;
  switch (passthrough() ? Policy::off : o.policy) {
    case Policy::off:
      c.policy = policy::PolicyKind::off;
      break;
    case Policy::spill:
      c.policy = policy::PolicyKind::spill;
      break;
    case Policy::managed:
      c.policy = policy::PolicyKind::managed;
      break;
    case Policy::pinned:
      c.policy = policy::PolicyKind::pinned;
      break;
    case Policy::swap:
      c.policy = policy::PolicyKind::swap;
      break;
    case Policy::auto_:
      c.policy = policy::PolicyKind::auto_;
      break;
  }
  c.spill = o.spill == SpillTo::pinned ? policy::SpillTarget::pinned : policy::SpillTarget::managed;
  c.min_size = o.min_size.bytes;
  uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  c.managed_limit = o.managed_limit.resolve(ram);
  c.limit_enforced = o.device_limit.any && !passthrough();
  return c;
}

}  // namespace

const policy::PlacementConfig& placement_config() {
  static const policy::PlacementConfig c = make_config();
  return c;
}

bool movable_policy() {
  const auto k = placement_config().policy;
  return k == policy::PolicyKind::swap || k == policy::PolicyKind::auto_;
}

bool scan_order() { return movable_policy() && options().swap_order == SwapOrder::scan; }

bool placement_active() {
  const auto& c = placement_config();
  return c.policy != policy::PolicyKind::off || c.limit_enforced;
}

}  // namespace gms::act
