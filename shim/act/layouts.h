#pragma once
// What the driver tells of kernels, asked once per function: where each argument lies in a launch's
// parameters, for the launch scan (act/residency.h) to read every word as a pointer; and which
// kernel a function is, for the step learner.
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

// A key for the kernel `f` runs: its name hashed, so that a handle made anew for the same kernel
// keys the same (seen on the H100: one kernel of a decoding model got a new handle every forward pass
// of the model, which hid its step from the learner). The handle itself when the driver gives
// no name. A handle the driver reuses for another kernel after an unload keeps the old key: the
// learner may follow a step that is not there, which costs speed, never data. Thread-safe.
uint64_t function_key(CUfunction f);

}  // namespace gms::act
