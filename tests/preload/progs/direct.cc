// (a) A program linked against libcuda (-lcuda): it calls the driver by name, as code written
// against the driver API does. Built twice: as is, and with CUDA_API_PER_THREAD_DEFAULT_STREAM, where
// cuda.h maps the names to the _ptds/_ptsz implementations (nvcc --default-stream per-thread).
#include "common.h"

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
constexpr bool kPerThread = true;
#else
constexpr bool kPerThread = false;
#endif

namespace {

// Direct calls through the PLT: the names below are cuda.h's macros (cuMemAlloc -> cuMemAlloc_v2,
// cuMemcpyHtoD -> cuMemcpyHtoD_v2 or cuMemcpyHtoD_v2_ptds...).
struct Direct {
  static CUresult init(unsigned f) { return cuInit(f); }
  static CUresult device_get(CUdevice* d, int o) { return cuDeviceGet(d, o); }
  static CUresult ctx_retain(CUcontext* c, CUdevice d) { return cuDevicePrimaryCtxRetain(c, d); }
  static CUresult ctx_set(CUcontext c) { return cuCtxSetCurrent(c); }
  static CUresult mem_get_info(size_t* f, size_t* t) { return cuMemGetInfo(f, t); }
  static CUresult alloc(CUdeviceptr* p, size_t n) { return cuMemAlloc(p, n); }
  static CUresult free(CUdeviceptr p) { return cuMemFree(p); }
  static CUresult alloc_host(void** p, size_t n) { return cuMemAllocHost(p, n); }
  static CUresult free_host(void* p) { return cuMemFreeHost(p); }
  static CUresult stream_create(CUstream* s, unsigned f) { return cuStreamCreate(s, f); }
  static CUresult stream_destroy(CUstream s) { return cuStreamDestroy(s); }
  static CUresult stream_sync(CUstream s) { return cuStreamSynchronize(s); }
  static CUresult htod(CUdeviceptr d, const void* s, size_t n) { return cuMemcpyHtoD(d, s, n); }
  static CUresult dtoh(void* d, CUdeviceptr s, size_t n) { return cuMemcpyDtoH(d, s, n); }
  static CUresult dtod(CUdeviceptr d, CUdeviceptr s, size_t n) { return cuMemcpyDtoD(d, s, n); }
  static CUresult htod_async(CUdeviceptr d, const void* s, size_t n, CUstream st) { return cuMemcpyHtoDAsync(d, s, n, st); }
  static CUresult dtoh_async(void* d, CUdeviceptr s, size_t n, CUstream st) { return cuMemcpyDtoHAsync(d, s, n, st); }
  static CUresult copy(CUdeviceptr d, CUdeviceptr s, size_t n) { return cuMemcpy(d, s, n); }
  static CUresult memset32(CUdeviceptr d, unsigned v, size_t n) { return cuMemsetD32(d, v, n); }
  static CUresult memset8(CUdeviceptr d, unsigned char v, size_t n) { return cuMemsetD8(d, v, n); }
  static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned sh, CUstream st, void** p, void** e) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, st, p, e);
  }
  static CUresult launch_ex(const CUlaunchConfig* c, CUfunction f, void** p, void** e) { return cuLaunchKernelEx(c, f, p, e); }
};

}  // namespace

int main(int argc, char** argv) {
  bool shim = preload::has_arg(argc, argv, "--shim");
  size_t n = 64 * 1024;

  // The addresses the dynamic linker bound for us: the shim's hooks when it is preloaded.
  preload::check_hooked(reinterpret_cast<void*>(&cuMemAlloc), shim, "cuMemAlloc");
  preload::check_hooked(reinterpret_cast<void*>(&cuMemcpyHtoD), shim, "cuMemcpyHtoD");
  preload::check_hooked(reinterpret_cast<void*>(&cuMemcpyDtoHAsync), shim, "cuMemcpyDtoHAsync");
  preload::check_hooked(reinterpret_cast<void*>(&cuLaunchKernel), shim, "cuLaunchKernel");
  preload::check_hooked(reinterpret_cast<void*>(&cuMemsetD8), shim, "cuMemsetD8");
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM  // there cuGetProcAddress is an inline wrapper in cuda.h
  preload::check_hooked(reinterpret_cast<void*>(&cuGetProcAddress), shim, "cuGetProcAddress");
#endif
  preload::check_hooked(reinterpret_cast<void*>(&cuInit), false, "cuInit");  // not hooked

  preload::CallSnapshot before = preload::snapshot(&fake_cuda_calls, kPerThread);
  preload::run_workload(Direct{}, n);
  preload::check_calls_since(before, &fake_cuda_calls, kPerThread);
  std::printf("direct%s: ok\n", kPerThread ? " (per-thread default stream)" : "");
  return 0;
}
