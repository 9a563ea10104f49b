#pragma once
// The stand-in driver's test-only interface (exported next to the driver entry points).
#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// How many calls reached the implementation exported under `symbol` ("cuMemcpyHtoD_v2_ptds").
// NULL: the sum over every implementation. ULONG_MAX: the driver has no such implementation.
unsigned long fake_cuda_calls(const char* symbol);
typedef unsigned long (*fake_cuda_calls_fn)(const char* symbol);

// Memory the driver owns but that no entry point handed out (as a module's globals, or an allocation
// made before an interposer was loaded): cuMemFree_v2 / cuMemFreeHost accept it, the shim never saw it.
CUdeviceptr fake_cuda_alloc_untracked(size_t bytes);
void* fake_cuda_host_alloc_untracked(size_t bytes);

// Describes the parameters of a host "kernel" for cuFuncGetParamInfo (sizes in bytes, at most 16).
// Without it a kernel is taken to have no parameters. Returns 0 on success.
int fake_cuda_set_kernel_params(CUfunction f, const size_t* sizes, size_t count);

#ifdef __cplusplus
}
#endif
