#pragma once
// Shared by the preload test programs: checks, "kernels" for the stand-in driver (host functions it
// runs synchronously), the table of driver entry points the standard workload uses, and the
// standard workload itself. The runner (run_preload_tests.py) knows what the workload does and
// asserts the shim's statistics exactly; keep the two in step (see Expect.workload there).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <thread>
#include <vector>

#include "fake_cuda_test.h"

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

#define CHECK_RESULT(call, expected)                                                                   \
  do {                                                                                                 \
    CUresult check_r_ = (call);                                                                        \
    if (check_r_ != (expected)) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call, (int)check_r_, \
                   (int)(expected));                                                                   \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)
#define CK(call) CHECK_RESULT(call, CUDA_SUCCESS)

namespace preload {

constexpr size_t kTotalMem = 16ull << 30;  // what the stand-in driver reports

// ---- kernels: CUfunction is a host function the stand-in runs with the kernel parameters -----------

using HostKernel = void (*)(void**);
inline CUfunction as_function(HostKernel k) { return reinterpret_cast<CUfunction>(k); }
template <typename T>
T* dev_ptr(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

// c[i] = a[i] + b[i] + c[i]; params: CUdeviceptr c, a, b; size_t count
inline void k_add3(void** p) {
  uint32_t* c = dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0]));
  const uint32_t* a = dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[1]));
  const uint32_t* b = dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[2]));
  size_t n = *static_cast<size_t*>(p[3]);
  for (size_t i = 0; i < n; ++i) c[i] = a[i] + b[i] + c[i];
}

// x[i] = 7 for every byte; params: CUdeviceptr x, size_t bytes. declare_fill() tells the stand-in
// driver its parameter layout, as the launch scan reads it.
inline void k_fill(void** p) {
  unsigned char* x = dev_ptr<unsigned char>(*static_cast<CUdeviceptr*>(p[0]));
  size_t n = *static_cast<size_t*>(p[1]);
  std::memset(x, 7, n);
}
inline int declare_fill() {
  size_t sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
  return fake_cuda_set_kernel_params(as_function(k_fill), sizes, 2);
}
inline CUresult launch_fill(CUdeviceptr x, size_t n, CUstream s) {
  void* params[] = {&x, &n};
  return cuLaunchKernel(as_function(k_fill), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

// x[i] *= k; params: CUdeviceptr x; uint32_t k; size_t count
inline void k_scale(void** p) {
  uint32_t* x = dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0]));
  uint32_t k = *static_cast<uint32_t*>(p[1]);
  size_t n = *static_cast<size_t*>(p[2]);
  for (size_t i = 0; i < n; ++i) x[i] *= k;
}

// ---- where a pointer lives --------------------------------------------------------------------------

inline const char* object_of(const void* p) {
  Dl_info info;
  if (!p || !dladdr(p, &info) || !info.dli_fname) return "?";
  return info.dli_fname;
}
inline bool in_shim(const void* p) { return std::strstr(object_of(p), "libgpumemshim") != nullptr; }
inline bool in_fake(const void* p) { return std::strstr(object_of(p), "libcuda.so") != nullptr; }

// Every program takes --shim when the runner preloads the shim: entry points handed to the program
// must then be the shim's hooks, and without it the stand-in's own implementations.
inline bool has_arg(int argc, char** argv, const char* arg) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], arg) == 0) return true;
  }
  return false;
}
// cuInit, then device 0's primary context made current (programs linked with -lcuda).
inline void use_device0() {
  CUdevice dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
}

// cuMemGetInfo's free memory, checking that its total is the device budget the runner set.
inline size_t free_within(size_t budget) {
  size_t f = 0, t = 0;
  CK(cuMemGetInfo(&f, &t));
  CHECK(t == budget);
  return f;
}

// Calls of the stand-in driver's `symbol` since construction (programs linked with the stand-in).
struct CallCount {
  const char* symbol;
  unsigned long before;
  explicit CallCount(const char* s) : symbol(s), before(fake_cuda_calls(s)) {}
  unsigned long added() const { return fake_cuda_calls(symbol) - before; }
};

// Runs body(t, dev) on n threads at once, each with device 0's primary context current and its own
// 8 MiB device buffer `dev`; body returns false when the data it checked was wrong. Exits non-zero
// if any thread failed.
template <typename F>
void on_threads(int n, F body) {
  std::vector<std::thread> threads;
  std::vector<int> ok(static_cast<size_t>(n), 0);
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([t, &ok, &body] {
      CUdevice d;
      CUcontext c;
      CUdeviceptr dev;
      if (cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) || cuMemAlloc(&dev, 8 << 20)) return;
      ok[static_cast<size_t>(t)] = body(t, dev) && cuMemFree(dev) == CUDA_SUCCESS;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < n; ++t) {
    if (!ok[static_cast<size_t>(t)]) {
      std::fprintf(stderr, "thread %d of %d failed\n", t, n);
      std::exit(1);
    }
  }
}

inline void check_hooked(const void* p, bool shim, const char* what) {
  bool ok = shim ? in_shim(p) : in_fake(p);
  if (!ok) {
    std::fprintf(stderr, "%s resolved to %p in %s, expected the %s\n", what, p, object_of(p),
                 shim ? "shim (libgpumemshim.so)" : "stand-in driver (libcuda.so.1)");
    std::exit(1);
  }
}

// ---- the entry points of the standard workload --------------------------------------------------------

// X(field, PFN type, base name, version, default-stream implementation, per-thread implementation, hooked,
//   calls the workload makes)
#define PRELOAD_API(X)                                                                                            \
  X(init, PFN_cuInit_v2000, "cuInit", 2000, "cuInit", "cuInit", true, 1)                                           \
  X(device_get, PFN_cuDeviceGet_v2000, "cuDeviceGet", 2000, "cuDeviceGet", "cuDeviceGet", false, 1)               \
  X(ctx_retain, PFN_cuDevicePrimaryCtxRetain_v7000, "cuDevicePrimaryCtxRetain", 7000, "cuDevicePrimaryCtxRetain", \
    "cuDevicePrimaryCtxRetain", false, 1)                                                                          \
  X(ctx_set, PFN_cuCtxSetCurrent_v4000, "cuCtxSetCurrent", 4000, "cuCtxSetCurrent", "cuCtxSetCurrent", false, 1)  \
  X(mem_get_info, PFN_cuMemGetInfo_v3020, "cuMemGetInfo", 3020, "cuMemGetInfo_v2", "cuMemGetInfo_v2", true, 1)    \
  X(alloc, PFN_cuMemAlloc_v3020, "cuMemAlloc", 3020, "cuMemAlloc_v2", "cuMemAlloc_v2", true, 3)                   \
  X(free, PFN_cuMemFree_v3020, "cuMemFree", 3020, "cuMemFree_v2", "cuMemFree_v2", true, 3)                        \
  X(alloc_host, PFN_cuMemAllocHost_v3020, "cuMemAllocHost", 3020, "cuMemAllocHost_v2", "cuMemAllocHost_v2", true, 1) \
  X(free_host, PFN_cuMemFreeHost_v2000, "cuMemFreeHost", 2000, "cuMemFreeHost", "cuMemFreeHost", true, 1)         \
  X(stream_create, PFN_cuStreamCreate_v2000, "cuStreamCreate", 2000, "cuStreamCreate", "cuStreamCreate", false, 1) \
  X(stream_destroy, PFN_cuStreamDestroy_v4000, "cuStreamDestroy", 4000, "cuStreamDestroy_v2", "cuStreamDestroy_v2", \
    false, 1)                                                                                                      \
  X(stream_sync, PFN_cuStreamSynchronize_v2000, "cuStreamSynchronize", 2000, "cuStreamSynchronize",                \
    "cuStreamSynchronize_ptsz", true, 2)                                                                           \
  X(htod, PFN_cuMemcpyHtoD_v3020, "cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds", true, 1)        \
  X(dtoh, PFN_cuMemcpyDtoH_v3020, "cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds", true, 1)        \
  X(dtod, PFN_cuMemcpyDtoD_v3020, "cuMemcpyDtoD", 3020, "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds", true, 1)        \
  X(htod_async, PFN_cuMemcpyHtoDAsync_v3020, "cuMemcpyHtoDAsync", 3020, "cuMemcpyHtoDAsync_v2",                    \
    "cuMemcpyHtoDAsync_v2_ptsz", true, 1)                                                                          \
  X(dtoh_async, PFN_cuMemcpyDtoHAsync_v3020, "cuMemcpyDtoHAsync", 3020, "cuMemcpyDtoHAsync_v2",                    \
    "cuMemcpyDtoHAsync_v2_ptsz", true, 1)                                                                          \
  X(copy, PFN_cuMemcpy_v4000, "cuMemcpy", 4000, "cuMemcpy", "cuMemcpy_ptds", true, 2)                              \
  X(memset32, PFN_cuMemsetD32_v3020, "cuMemsetD32", 3020, "cuMemsetD32_v2", "cuMemsetD32_v2_ptds", true, 1)        \
  X(memset8, PFN_cuMemsetD8_v3020, "cuMemsetD8", 3020, "cuMemsetD8_v2", "cuMemsetD8_v2_ptds", true, 1)             \
  X(launch, PFN_cuLaunchKernel_v4000, "cuLaunchKernel", 4000, "cuLaunchKernel", "cuLaunchKernel_ptsz", true, 1)    \
  X(launch_ex, PFN_cuLaunchKernelEx_v11060, "cuLaunchKernelEx", 11060, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", \
    true, 1)

struct Api {
#define PRELOAD_FIELD(field, pfn, base, version, impl, impl_pt, hooked, calls) pfn field = nullptr;
  PRELOAD_API(PRELOAD_FIELD)
#undef PRELOAD_FIELD
};

// Fills every field from resolve(base, version, implementation name); `per_thread` picks the
// _ptds/_ptsz implementations. Checks that each hooked entry point is the shim's when `shim`.
template <typename Resolve>
void fill_api(Api* api, bool per_thread, bool shim, Resolve&& resolve) {
#define PRELOAD_FILL(field, pfn, base, version, impl, impl_pt, hooked, calls)            \
  {                                                                                     \
    void* p = resolve(base, version, per_thread ? impl_pt : impl);                      \
    if (!p) {                                                                           \
      std::fprintf(stderr, "no entry point for %s\n", per_thread ? impl_pt : impl);    \
      std::exit(1);                                                                     \
    }                                                                                   \
    check_hooked(p, shim && (hooked), per_thread ? impl_pt : impl);                     \
    api->field = reinterpret_cast<pfn>(p);                                              \
  }
  PRELOAD_API(PRELOAD_FILL)
#undef PRELOAD_FILL
}

struct CallSnapshot {
#define PRELOAD_SNAP(field, pfn, base, version, impl, impl_pt, hooked, calls) unsigned long field = 0;
  PRELOAD_API(PRELOAD_SNAP)
#undef PRELOAD_SNAP
};

inline CallSnapshot snapshot(fake_cuda_calls_fn calls, bool per_thread) {
  CallSnapshot s;
#define PRELOAD_TAKE(field, pfn, base, version, impl, impl_pt, hooked, calls_) \
  s.field = calls(per_thread ? impl_pt : impl);                               \
  CHECK(s.field != ~0ul);
  PRELOAD_API(PRELOAD_TAKE)
#undef PRELOAD_TAKE
  return s;
}

// Each implementation the workload used was reached exactly as often as the workload called it:
// the shim in between neither dropped nor repeated a call, and routed it to the right implementation.
inline void check_calls_since(const CallSnapshot& before, fake_cuda_calls_fn calls, bool per_thread,
                              unsigned long times = 1) {
#define PRELOAD_CMP(field, pfn, base, version, impl, impl_pt, hooked, calls_)                                    \
  {                                                                                                              \
    const char* name = per_thread ? impl_pt : impl;                                                              \
    unsigned long got = calls(name) - before.field;                                                              \
    unsigned long want = static_cast<unsigned long>(calls_) * times;                                             \
    if (got != want) {                                                                                           \
      std::fprintf(stderr, "%s reached the driver %lu times, expected %lu\n", name, got, want);                 \
      std::exit(1);                                                                                              \
    }                                                                                                            \
  }
  PRELOAD_API(PRELOAD_CMP)
#undef PRELOAD_CMP
}

// ---- the standard workload ------------------------------------------------------------------------------
//
// With n bytes per buffer (a multiple of 4, below the host-block threshold) it makes, through `api`:
//   cuMemGetInfo x1; cuMemAlloc x3 (3n); cuMemAllocHost x1 (n); cuMemFree x3; cuMemFreeHost x1;
//   copies x7 (7n): HtoD pageable, HtoDAsync pinned, DtoD, DtoH pageable, DtoHAsync pinned,
//   cuMemcpy device->pageable, cuMemcpy device->pinned;
//   memsets x2 (2n); cuLaunchKernel x1; cuLaunchKernelEx x1.
// Peak live: device 3n, pinned host n.
template <typename A>
void run_workload(const A& api, size_t n) {
  CHECK(n % 4 == 0 && n > 0);
  const size_t count = n / 4;
  CUdevice dev = -1;
  CUcontext ctx = nullptr;
  CK(api.init(0));
  CK(api.device_get(&dev, 0));
  CK(api.ctx_retain(&ctx, dev));
  CK(api.ctx_set(ctx));

  size_t free_bytes = 0, total = 0;
  CK(api.mem_get_info(&free_bytes, &total));
  CHECK(total == kTotalMem && free_bytes <= total);

  CUdeviceptr a = 0, b = 0, c = 0;
  CK(api.alloc(&a, n));
  CK(api.alloc(&b, n));
  CK(api.alloc(&c, n));
  uint32_t* pin = nullptr;
  CK(api.alloc_host(reinterpret_cast<void**>(&pin), n));
  CUstream s = nullptr;
  CK(api.stream_create(&s, 0));

  auto* h = static_cast<uint32_t*>(std::malloc(n));
  CHECK(h);
  for (size_t i = 0; i < count; ++i) {
    h[i] = static_cast<uint32_t>(i);
    pin[i] = static_cast<uint32_t>(2 * i);
  }
  CK(api.htod(a, h, n));                    // a = i          (pageable)
  CK(api.htod_async(b, pin, n, s));         // b = 2i         (pinned)
  CK(api.stream_sync(s));
  CK(api.memset32(c, 1u, count));           // c = 1
  void* add_params[] = {&c, &a, &b, const_cast<size_t*>(&count)};
  CK(api.launch(as_function(k_add3), static_cast<unsigned>((count + 255) / 256), 1, 1, 256, 1, 1, 0, s, add_params,
                nullptr));                  // c = 3i + 1
  CK(api.dtod(a, c, n));                    // a = 3i + 1
  std::memset(h, 0, n);
  CK(api.dtoh(h, a, n));                    // pageable
  for (size_t i = 0; i < count; ++i) CHECK(h[i] == 3 * i + 1);
  CK(api.memset8(b, 7, n));                 // b = 0x07070707
  CK(api.dtoh_async(pin, b, n, s));         // pinned
  CK(api.stream_sync(s));
  for (size_t i = 0; i < count; ++i) CHECK(pin[i] == 0x07070707u);
  std::memset(h, 0, n);
  CK(api.copy(reinterpret_cast<CUdeviceptr>(h), c, n));  // unified: device -> pageable
  for (size_t i = 0; i < count; ++i) CHECK(h[i] == 3 * i + 1);
  uint32_t two = 2;
  void* scale_params[] = {&c, &two, const_cast<size_t*>(&count)};
  CUlaunchConfig cfg = {};
  cfg.gridDimX = static_cast<unsigned>((count + 255) / 256);
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = s;
  CK(api.launch_ex(&cfg, as_function(k_scale), scale_params, nullptr));  // c = 6i + 2
  CK(api.copy(reinterpret_cast<CUdeviceptr>(pin), c, n));                // unified: device -> pinned
  for (size_t i = 0; i < count; ++i) CHECK(pin[i] == 6 * i + 2);

  CK(api.free(a));
  CK(api.free(b));
  CK(api.free(c));
  CK(api.free_host(pin));
  CK(api.stream_destroy(s));
  std::free(h);
}

// Runs the standard workload through `api`, then checks that every implementation it used was reached
// exactly as often as the workload called it (see check_calls_since).
template <typename A>
void run_workload_checked(const A& api, size_t n, fake_cuda_calls_fn calls, bool per_thread) {
  CallSnapshot before = snapshot(calls, per_thread);
  run_workload(api, n);
  check_calls_since(before, calls, per_thread);
}

// The workload's entry points for programs linked against libcuda (-lcuda): direct calls through the
// PLT, as code written against the driver API makes them. The names below are cuda.h's macros
// (cuMemAlloc -> cuMemAlloc_v2, cuMemcpyHtoD -> cuMemcpyHtoD_v2 or, under
// CUDA_API_PER_THREAD_DEFAULT_STREAM, cuMemcpyHtoD_v2_ptds...). Programs that do not link libcuda
// never use it, so these inline members are never emitted there.
struct Linked {
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

// Fills an Api through cuGetProcAddress_v2 (what the CUDA runtime does).
inline void fill_api_from_proc(Api* api, PFN_cuGetProcAddress_v12000 gpa, int version, bool per_thread, bool shim) {
  fill_api(api, per_thread, shim, [&](const char* base, int min_version, const char*) -> void* {
    void* p = nullptr;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    int v = version > min_version ? version : min_version;
    CK(gpa(base, &p, v, per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st));
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
    return p;
  });
}

}  // namespace preload
