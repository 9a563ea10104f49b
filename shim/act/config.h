#pragma once
// What the options make of the shim's decisions, resolved once: the placement policy's
// configuration, and whether allocations need deciding at all. Asked by placement, residency and
// the copy paths, so none of them needs another to know it.
#include "policy/placement.h"

namespace gms::act {

const policy::PlacementConfig& placement_config();
// Whether the policy makes movable memory (swap, auto).
bool movable_policy();
// Whether movable memory's moves are in scan order (GPUMEMSHIM_SWAP_ORDER): a movable policy and
// that order. Other policies plan and order nothing by it.
bool scan_order();
// Whether allocations need deciding at all: a policy other than off, or an enforced limit.
bool placement_active();

}  // namespace gms::act
