#pragma once
// The staged copy: the shim's own pinned buffers and worker threads. Chunks of a pageable copy are
// copied into (or out of) pinned staging by several threads at once while the DMA of the previous
// chunk runs, which beats the driver's own single-threaded staging (7.4 GB/s for 1 GiB on our H100)
// by several times without pinning the program's memory.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "driver/cuda_driver.h"

namespace gms::act {

// Host to device. Returns once the source has been read entirely (the driver's contract for a
// pageable source); with `wait`, once the copy is complete (synchronous copies).
CUresult staged_htod(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream, bool wait);
// As staged_htod without waiting, copied into staging by the calling thread alone (for a short
// part of a copy whose DMA runs meanwhile); nullopt, having done nothing, when another staged copy
// holds the buffers.
std::optional<CUresult> try_staged_htod(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
// Device to host: returns once the data is in `dst` (the driver's contract for pageable memory).
CUresult staged_dtoh(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
// A memcpy between two host buffers by the copy crew (several threads), with no CUDA call; src ==
// nullptr: the first touch of fresh memory's pages instead (a zero written to each 4 KiB page).
// While another staged copy holds the crew it waits, or gives up (IfBusy::give_up). False, having
// done nothing, when it gave up or the crew cannot be had (it is its parent's, in a fork child).
enum class IfBusy : uint8_t { wait, give_up };
bool crew_memcpy(void* dst, const void* src, size_t bytes, IfBusy busy = IfBusy::wait);

}  // namespace gms::act
