// (a) A program linked against libcuda (-lcuda): it calls the driver by name, as code written
// against the driver API does. Built twice: as is, and with CUDA_API_PER_THREAD_DEFAULT_STREAM, where
// cuda.h maps the names to the _ptds/_ptsz implementations (nvcc --default-stream per-thread).
#include "common.h"

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
constexpr bool kPerThread = true;
#else
constexpr bool kPerThread = false;
#endif

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
  preload::check_hooked(reinterpret_cast<void*>(&cuInit), shim, "cuInit");

  preload::run_workload_checked(preload::Linked{}, n, &fake_cuda_calls, kPerThread);
  std::printf("direct%s: ok\n", kPerThread ? " (per-thread default stream)" : "");
  return 0;
}
