#pragma once
// CUDA arrays (cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate: what textures and surfaces
// read, what cudaMallocArray makes): device memory with no address, laid out by the driver. Pure
// code: their size, estimated from the shape the program gives, and where one may go.
//
// An array cannot be host memory: the driver places it. Past the budget the shim can only make room
// by moving movable memory away first, else answer as a card of the budget's size would.
#include <cstdint>

#include "placement.h"

namespace gms::policy {

// The fields of CUDA_ARRAY3D_DESCRIPTOR (a 2D descriptor: depth 0, flags 0), as plain numbers.
struct ArrayShape {
  uint64_t width = 0;
  uint64_t height = 0;  // 0: one-dimensional
  uint64_t depth = 0;   // 0: not three-dimensional; layers of a layered array; 6 (x layers) for a cube map
  uint32_t format = 0;  // CUarray_format
  uint32_t channels = 1;
  uint32_t flags = 0;   // CUDA_ARRAY3D_*
  uint32_t levels = 1;  // mipmap levels (cuMipmappedArrayCreate)
};
constexpr uint32_t kArrayLayered = 0x01;  // CUDA_ARRAY3D_LAYERED: depth counts layers, not halved per level
constexpr uint32_t kArrayCubemap = 0x04;  // CUDA_ARRAY3D_CUBEMAP: depth counts faces, likewise
constexpr uint32_t kArraySparse = 0x40;   // CUDA_ARRAY3D_SPARSE: memory comes later, mapped by the program
constexpr uint32_t kArrayDeferred = 0x80;  // CUDA_ARRAY3D_DEFERRED_MAPPING: likewise

// Bytes of texels the array holds, all levels: the driver's tiling adds some, which the estimate
// leaves out. Formats the table does not know count four bytes a channel. Sparse and deferred-
// mapping arrays hold none when made (their memory is the program's own cuMemCreate, counted there).
uint64_t array_bytes(const ArrayShape& a);

// Within the budget: on the device. Past it: out of memory, under every policy (under off only
// with a device limit the user set); the caller makes room first where it can. Also what decides
// the device-side malloc heap's growth (shim/act/heap.h), which cannot be host memory either.
Placement place_array(const PlacementConfig& cfg, const DeviceBudget& budget, uint64_t bytes);

}  // namespace gms::policy
