#pragma once
// The CUDA side of the trace (cuda_backend.cc): CUPTI and the header's devices, plugged into the
// collector. Called once by the library constructor, after runtime_init.
namespace gms::trace {

void attach_cuda_backend();

// The driver's name of an error ("CUDA_ERROR_OUT_OF_MEMORY"), for trace lines; it lives as long as
// the driver. "CUDA_ERROR_UNKNOWN" when the driver cannot say.
const char* cuda_error_name(int result);

}  // namespace gms::trace
