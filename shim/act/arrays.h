#pragma once
// CUDA arrays (cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate; cudaMallocArray and
// cudaMalloc3DArray in the runtime): device memory with no address, which the driver lays out and
// which cannot be host memory. Each counts against the budget, at the size its shape gives
// (policy/arrays.h), from its creation to its destroy. Past the budget, movable memory makes room
// first (it moves to the host); else the program gets the driver's own out-of-memory error.
#include <cstdint>

#include "driver/cuda_driver.h"
#include "policy/arrays.h"

namespace gms::act {

// Whether an array of `bytes` may be made on the current device; false: answer out of memory.
// Makes room (freed movable memory kept for reuse first, then evictions of movable and prefetched
// managed memory) when the budget is short, and leaves no spare device memory beyond what the
// array leaves of the budget. `what` names the memory in the refusal's log line (the device-side
// malloc heap is booked as an array: act/heap.h).
bool array_may_create(uint64_t bytes, int* dev, const char* what = "CUDA array");
// The driver said out of memory (the card is fuller than the budget says): every bit of device
// memory the shim keeps for reuse goes back; true when some did, and the create is worth a retry.
bool array_room_after_refusal(int dev);
// The array `handle` (a CUarray or CUmipmappedArray) was made: it counts from now.
void array_created(uint64_t handle, uint64_t bytes, int dev);
// Before the driver destroys `handle`: it counts no more, and the books say what it was (bytes 0
// when unknown), for array_created to put back should the destroy fail. Taken off before the call:
// a handle the driver hands out again at once belongs to the next array.
struct ArrayBooked {
  uint64_t bytes = 0;
  int dev = -1;
};
ArrayBooked array_destroying(uint64_t handle);

}  // namespace gms::act
