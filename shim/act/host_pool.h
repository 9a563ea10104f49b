#pragma once
// Recycled host blocks (GPUMEMSHIM_HOST_POOL): large malloc-family blocks served from one
// address-space reservation, kept with their pages and their registration when the program frees
// them (policy/host_pool keeps the books). To the program a pool block is an ordinary malloc
// block: free, realloc, malloc_usable_size and calloc behave as glibc's.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/registry.h"

namespace gms::act::pool {

// The reservation; span 0 while the pool is off. Written once, when the pool starts.
extern std::atomic<uintptr_t> g_lo, g_span;

// Two loads and a compare: on every free.
inline bool owns(const void* p) {
  uintptr_t span = g_span.load(std::memory_order_acquire);  // published after g_lo
  return reinterpret_cast<uintptr_t>(p) - g_lo.load(std::memory_order_relaxed) < span;
}
inline bool on() { return g_span.load(std::memory_order_relaxed) != 0; }

// From the library constructor, after the options: whether a pool is wanted. Nothing is reserved
// yet: start reserves the address space once the CUDA driver is loaded.
void init();
// For a large block while the pool is off: reserves it if it is wanted and the driver is loaded.
// True when the pool is on.
bool start();

// A block of at least n bytes aligned to `align` (at most a page), or nullptr: the ordinary
// allocator serves it (pool off or full, or alignment too large). `zero`: calloc.
void* take(size_t n, size_t align, Origin origin, bool zero);
// The program frees a pool block.
void give(void* p);
// malloc_usable_size of a pool block; 0 if p is not the start of a live one.
size_t usable(const void* p);

}  // namespace gms::act::pool
