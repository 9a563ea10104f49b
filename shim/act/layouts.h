#pragma once
// Kernels' parameter layouts, asked of the driver once per function: where each argument lies in a
// launch's parameters, for the launch scan (act/residency.h) to read every word as a pointer.
#include <cstdint>
#include <vector>

#include "driver/cuda_driver.h"

namespace gms::act {

struct Param {
  uint32_t offset;
  uint32_t size;
};

// The layout of `f` (a CUfunction, or a CUkernel the CUDA runtime passes in its place). Empty: no
// parameters, a failed query (not kept: asked again at the next launch), or a kernel whose memory
// no scan sees whatever its layout (NCCL's, under scan order). Thread-safe; the reference stays
// valid for the process's life.
const std::vector<Param>& kernel_layout(CUfunction f);

}  // namespace gms::act
