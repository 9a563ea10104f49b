#pragma once
// Movable device memory (GPUMEMSHIM_POLICY=swap): the program gets a reserved virtual range that
// stays valid for its whole life, backed chunk by chunk either by device memory or by pinned host
// memory mapped for the device. Either way every kernel reads and writes it correctly (host-backed
// chunks over the link, at 50 GB/s on the H100), so no missed reference can fault or lose data;
// the residency planner only decides where each chunk should be for speed.
//
// Why not managed memory for this: on the H100 (tests/gpu/placement/vmm_moves.cu against
// managed_moves.cu) a chunk leaves the device by a copy at 55 GB/s plus 13 ms per GiB of remapping,
// where cuMemPrefetchAsync to the host moves managed memory at 13 to 15 GB/s; in the other
// direction 55 GB/s plus 4 ms per GiB against 43 to 50 GB/s. Training loops that outgrow their
// budget evict as much as they bring back.
//
// Moves are synchronous: the copies go on the launch's stream, then the whole context is
// synchronised before the range is remapped, so no queued kernel (on any stream) can be using the
// chunk while its backing changes. A launch that moves something therefore waits for the work
// queued before it.
#include <cstdint>

#include "driver/cuda_driver.h"

namespace gms::act::swap {

// The unit of backing: the residency planner's chunk, so its actions map to whole chunks.
uint64_t chunk_bytes();

// Reserves a range of `bytes` (rounded up to 2 MiB) on `dev` and backs it with device memory when
// `on_device`, else with host memory. Out-of-memory and other driver errors leave nothing behind.
CUresult create(CUdeviceptr* out, uint64_t bytes, int dev, bool on_device);

// Unmaps and releases everything behind the range. The caller makes sure no work still uses it.
CUresult destroy(uintptr_t base);

// Moves the chunks covering [base + offset, base + offset + bytes) to the device or to the host,
// copying their contents on `stream`. Chunks already there are left alone. On failure the chunks
// not yet moved keep their backing (and their data); the result says the first error.
CUresult move(uintptr_t base, uint64_t offset, uint64_t bytes, bool to_device, CUstream stream, bool per_thread);

}  // namespace gms::act::swap
