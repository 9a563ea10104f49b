#pragma once
// The CUDA side of the trace (cuda_backend.cc): CUPTI and the header's devices, plugged into the
// collector. Called once by the library constructor, after runtime_init.
namespace gms::trace {

void attach_cuda_backend();

}  // namespace gms::trace
