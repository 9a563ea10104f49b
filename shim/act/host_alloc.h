#pragma once
// Pinned host allocations made faster. cuMemHostAlloc of 1 GiB takes 320 to 420 ms on our H100
// (the driver faults its pages in on one thread) and cuMemFreeHost 86 ms; fresh pages faulted in
// by the copy crew and then registered take 97 to 102 ms, and unregistering and unmapping them
// 45 to 49 ms. Frameworks allocate pinned memory as they go (CuPy's pinned pool, PyTorch's
// pin_memory()), on the program's thread; the placement policies' pinned memory is made the same way.
#include <cstddef>

#include "driver/cuda_driver.h"

namespace gms::act {

constexpr size_t kFastHostAllocMin = 64u << 20;

// cuMemHostAlloc / cuMemAllocHost: true when the shim made the memory (result in *r): anonymous
// pages, first touched by the copy crew, registered portable and mapped. False, having done
// nothing, for what it leaves to the driver: small or write-combined allocations, GPUMEMSHIM_STAGE
// off, no crew (a fork child), or any step failing.
bool fast_host_alloc(void** pp, size_t bytes, unsigned flags, CUresult* r);
// cuMemFreeHost: true when the memory was made by fast_host_alloc (now unregistered and unmapped).
bool fast_host_free(void* p, CUresult* r);
// cuMemHostAlloc and cuMemFreeHost as the shim does them: its own way where fast_host_alloc takes
// the allocation, else the driver's.
CUresult host_alloc(void** pp, size_t bytes, unsigned flags);
CUresult host_free(void* p);
// Whether `p` is the start of memory made by fast_host_alloc and not yet freed.
bool fast_host_block(const void* p);

}  // namespace gms::act
