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

// The order of calls: a sequence number of the latest call that reached `symbol` (0: none yet;
// ULONG_MAX: no such implementation). Numbers grow with every call to any implementation.
unsigned long fake_cuda_last_call(const char* symbol);

// From now on `s` is being captured into a graph (on = 0: no stream is): cuStreamIsCapturing says
// so, and cuStreamSynchronize on it fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED as the driver's.
void fake_cuda_set_capturing(CUstream s, int on);

// From now on (on = 0: no longer; held copies run then) async copies whose host side is pinned or
// registered are held back, as a GPU's copy engine would run them later: they run at a stream,
// context or event synchronisation (an event: the copies before its record) or at any other copy,
// memset or launch. Freeing or unregistering pinned memory that a held copy uses aborts.
void fake_cuda_set_defer(int on);

// From now on (on = 0: no longer) cuEventQuery answers CUDA_ERROR_NOT_READY, as for work still
// running on a GPU; cuEventSynchronize still completes.
void fake_cuda_set_events_busy(int on);

// The next n cuMemCreate calls for device memory fail with CUDA_ERROR_OUT_OF_MEMORY, as on a card
// fuller than the budget says.
void fake_cuda_fail_device_creates(int n);

// How many cuMemSetAccess calls found the host word of the latest cuStreamWaitValue32 not 0 (a
// GPU's copies behind that wait would have been held back meanwhile).
unsigned long fake_cuda_access_calls_gated(void);

// Bytes copied by cuMemcpyDtoDAsync (both flavours) so far: the interposer's own copies between
// side ranges.
unsigned long long fake_cuda_dtod_async_bytes(void);

// The next async copy (host to device or back) calls fn(arg) first, before it looks at the host
// memory: a test's way to make something happen between an interposer's decision and the driver's
// look. Once only.
void fake_cuda_before_next_async_copy(void (*fn)(void*), void* arg);

// The memory mapped at [ptr, ptr + n) of a virtual-memory mapping, reached at another address that
// stays valid when the range is unmapped or remapped (as a running kernel reaches what was mapped
// when it started); NULL when no single mapping covers the range. Call it before the memory is
// released.
void* fake_cuda_physical(CUdeviceptr ptr, size_t n);

// Whether a cuMemCreate handle is host-located: 1, device-located: 0, no such handle: -1.
int fake_cuda_handle_on_host(CUmemGenericAllocationHandle handle);
// The handle types a cuMemCreate handle was asked for with (0 for none or no such handle).
unsigned fake_cuda_handle_types(CUmemGenericAllocationHandle handle);

// Memory the driver owns but that no entry point handed out (as a module's globals, or an allocation
// made before an interposer was loaded): cuMemFree_v2 / cuMemFreeHost accept it, the shim never saw it.
CUdeviceptr fake_cuda_alloc_untracked(size_t bytes);
void* fake_cuda_host_alloc_untracked(size_t bytes);

// The memory a texture object made by cuTexObjectCreate reads (0 for an unknown handle): how a
// host "kernel" reads through a texture handle.
CUdeviceptr fake_cuda_texture_ptr(CUtexObject tex);

// Describes the parameters of a host "kernel" for cuFuncGetParamInfo (sizes in bytes, at most 16).
// Without it a kernel is taken to have no parameters. Returns 0 on success.
int fake_cuda_set_kernel_params(CUfunction f, const size_t* sizes, size_t count);
// Names a host "kernel" for cuFuncGetName. Returns 0, or -1 for a null argument.
int fake_cuda_set_kernel_name(CUfunction f, const char* name);
// Device memory no hooked call made (a module's variable); 0 on failure. Never freed.
CUdeviceptr fake_cuda_module_global(size_t bytes);
// The type of a graph node the stand-in made (a CUgraphNodeType), or -1 for an unknown handle.
int fake_cuda_node_type(CUgraphNode node);

#ifdef __cplusplus
}
#endif
