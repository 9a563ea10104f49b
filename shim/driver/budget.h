#pragma once
// Each device's memory budget, in one place: GPUMEMSHIM_DEVICE_LIMIT applied to the device's
// memory, and what is left of it once the device memory the program holds (core/ledger.h) is
// counted. Placement, residency, the movable memory and the trace's header all ask here.
#include <cstddef>
#include <cstdint>

namespace gms::budget {

// The budget of device `dev` whose memory is `total` bytes (all of it when nothing limits it).
uint64_t of(int dev, uint64_t total);
// The budget of `dev`, resolved once from the driver and kept in the ledger; 0 when unknown.
uint64_t limit(int dev);
// What is left of the budget of `dev` after the device memory the program holds; 0 when over.
uint64_t left(int dev);
// cuMemGetInfo within the budget of `dev`: total is the budget, free what is left of it (never
// more than the driver's own free). Unchanged when the budget is not known.
void clamp_mem_info(int dev, size_t* free_bytes, size_t* total_bytes);

}  // namespace gms::budget
