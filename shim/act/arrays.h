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
// Makes room by evicting movable memory when the budget is short.
bool array_may_create(uint64_t bytes, int* dev);
// The array `handle` (a CUarray or CUmipmappedArray) was made: it counts from now.
void array_created(uint64_t handle, uint64_t bytes, int dev);
// It was destroyed: it counts no more.
void array_destroyed(uint64_t handle);

}  // namespace gms::act
