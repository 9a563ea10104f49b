#pragma once
// What the options make of the shim's decisions, resolved once: the placement policy's
// configuration, and whether allocations need deciding at all. Asked by placement, residency and
// the copy paths, so none of them needs another to know it.
#include "policy/placement.h"

namespace gms::act {

const policy::PlacementConfig& placement_config();
// Whether the policy makes movable memory (swap, auto).
bool movable_policy();
// Whether allocations need deciding at all: a policy other than off, or an enforced limit.
bool placement_active();

}  // namespace gms::act
