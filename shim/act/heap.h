#pragma once
// The device-side malloc heap (cuCtxSetLimit with CU_LIMIT_MALLOC_HEAP_SIZE; the runtime's
// cudaDeviceSetLimit(cudaLimitMallocHeapSize)): device memory the context reserves for kernels'
// malloc and new, which cannot be host memory. What it is set to beyond the size the context
// started with counts against the budget, booked as a CUDA array is (act/arrays.h): past the
// budget movable memory makes room first, else the program gets out-of-memory and the heap keeps
// its size. Setting it back gives the room back.
#include <cstddef>

#include "driver/cuda_driver.h"

namespace gms::act {

// `set` is the program's own call.
CUresult set_heap_size(size_t bytes, CUresult (*set)(void* ctx), void* ctx);

}  // namespace gms::act
