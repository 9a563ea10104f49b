#pragma once
// Pointer tables (policy/pointer_tables.h) as scan order meets them: device memory that holds
// addresses of movable memory, so that a kernel given the table uses what it points to.
//
// - What copies and memsets write into device memory (the copy hooks call host_wrote,
//   device_copied, cleared): a copy from the host is read for addresses of movable memory.
// - Kernels that write addresses into buffers: learnt once per function. The first launch given
//   movable memory and a small buffer (ordinary device memory or movable, at most 1 MiB) is waited
//   for, and the buffer read: a function whose buffers then hold addresses of movable memory
//   writes tables, and each of its launches makes its small buffers "may hold" what it was given.
//   Other functions are never looked at again. (A kernel that writes addresses only on some
//   launches, or into a larger buffer, or into memory no allocation of the program's owns, is not
//   found.)
// - At each launch, what the tables its arguments point into reach (reach), and the addresses
//   copied into device memory that no allocation holds (a module's variable, which any of its
//   kernels may read): ordered for every launch.
// Nothing here runs under context order or without movable memory: context order waits for the
// device before every move, whatever a kernel reaches.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "driver/cuda_driver.h"

namespace gms::act::tables {

// Scan order over movable memory that exists now.
bool active();

// A copy of `n` bytes from the host at `src` to device memory at `dst`, queued.
void host_wrote(uintptr_t dst, const void* src, size_t n);
// A copy of `n` bytes between device memory, queued.
void device_copied(uintptr_t dst, uintptr_t src, size_t n);
// A memset of `n` bytes at `dst`, queued.
void cleared(uintptr_t dst, size_t n);
// The allocation at `base` was freed: what it held goes with it (the next allocation there, which
// may come at once, holds no addresses).
void freed(uintptr_t base, uint64_t size);

struct Reached {
  std::vector<uintptr_t> used;     // addresses copies stored in the tables: uses like arguments
  std::vector<uintptr_t> ordered;  // addresses kernels may have written there: ordered only
  bool anything = false;           // a table that reaches anything: work no scan sees
};
// A launch of `f` whose argument words are `words`, of which `movable` point into movable memory:
// what the tables among its arguments reach (added to `out`), and what the launch may write into
// its small buffers. Called with the residency lock held, before the launch.
void at_launch(CUfunction f, const std::vector<uintptr_t>& words, const std::vector<uintptr_t>& movable, Reached* out);
// After the launch on `stream`: when at_launch left the function to be learnt, waits for the
// stream (a bounded time) and reads its small buffers (swap::read; once per function). No lock
// held.
void after_launch(CUstream stream, bool per_thread, bool launched);

}  // namespace gms::act::tables
