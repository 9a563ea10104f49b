#pragma once
// Fast copies from pageable memory (policy/pinning decides, this carries it out): register the
// program's host block and copy at pinned speed, or copy through the shim's staging buffers, or
// leave the call to the driver; and drop the shim's registrations before the memory goes away.
#include <cstddef>
#include <cstdint>

#include "driver/cuda_driver.h"

namespace gms::act {

enum class HostCopyDir : uint8_t { htod, dtoh };

struct HostCopy {
  HostCopyDir dir;
  void* host;        // pageable side
  CUdeviceptr dev;   // device side
  size_t bytes;
  CUstream stream;   // as the program passed it
  bool async;        // the program called an Async form
  bool per_thread;   // _ptds/_ptsz form: stream 0 is the per-thread default stream
};

// Copies as the program asked, by the fastest path that keeps the call's contract: synchronous
// stays synchronous; an async host-to-device copy from pageable memory returns once the source is
// consumed; an async device-to-host copy into pageable memory returns once the data is there.
// `ordinary` makes the program's own call. The copy's statistics are recorded by the caller.
CUresult copy_pageable(const HostCopy& c, CUresult (*ordinary)(void*), void* ctx);

// A copy whose device side is memory the shim placed on the host (spilled or converted to mapped
// pinned memory, or managed memory advised to live on the host that the residency planner has not
// moved to the device): both ends are host memory, so the copy crew copies it after the stream's
// earlier work, instead of the GPU's copy engine reading it over the link and writing it back
// (8 to 13 GB/s on our H100). Returns false, having done nothing, when that does not apply.
// The caller has made sure that `host` is host memory (pageable or pinned).
bool copy_host_placed(HostCopyDir dir, void* host, CUdeviceptr dev, size_t bytes, CUstream stream, bool async,
                      bool per_thread, CUresult* result);

// A memcpy or memmove (not overlapping) of at least kCrewCopyMin bytes to or from pinned memory
// the program got from CUDA is split across the copy crew: a framework filling its pinned staging
// buffer (CuPy's asarray copies a NumPy array into its pinned pool with one memmove) does so at
// several times one thread's speed. False, having done nothing, otherwise.
constexpr size_t kCrewCopyMin = 16u << 20;
bool copy_by_crew(void* dst, const void* src, size_t bytes);

// At load: fork handlers (a child keeps none of the parent's registrations).
void copy_init();

// Host memory is about to go away or be discarded: [lo, hi) (munmap, mremap, madvise, MAP_FIXED),
// or the block starting at `base` (free, realloc). Registrations the shim made there are dropped
// first. Cheap when the shim has none.
void host_range_going(uintptr_t lo, uintptr_t hi);
// The program registers memory itself: a registration of the shim's there would make its call
// fail, so it is dropped first; and the program's registration is the program's from then on.
void before_program_registers(uintptr_t lo, uintptr_t hi);

}  // namespace gms::act
