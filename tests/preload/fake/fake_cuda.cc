// The stand-in driver's registry and core (fake_internal.h says what the stand-in is and the rules
// all its parts keep): the table of implementations and their call counts, initialisation, device,
// context, stream and event, error strings, cuGetProcAddress.
#include <climits>
#include <cstring>

#include "fake_internal.h"

using namespace fake_internal;

namespace fake_internal {

std::atomic<unsigned long> g_calls[kCount];
std::atomic<unsigned long> g_last_seq[kCount];  // when each implementation was last called
std::atomic<unsigned long> g_seq{0};

}  // namespace fake_internal

namespace {

const char* const kNames[kCount] = {
#define GMS_HOOK(sym, pfn, family) #sym,
#include "driver/cuda_hooks.def"
#undef GMS_HOOK
#define FAKE_FN(sym, pfn) #sym,
#include "fake_extra.def"
#undef FAKE_FN
};

// Our own implementations (bound inside this library by -Bsymbolic, never to an interposer's).
void* const kImpl[kCount] = {
#define GMS_HOOK(sym, pfn, family) reinterpret_cast<void*>(&::sym),
#include "driver/cuda_hooks.def"
#undef GMS_HOOK
#define FAKE_FN(sym, pfn) reinterpret_cast<void*>(&::sym),
#include "fake_extra.def"
#undef FAKE_FN
};

// Every entry point the shim uses for itself must exist here (a missing one fails the link).
[[maybe_unused]] void* const kUsedByShim[] = {
#define GMS_USED(sym, pfn) reinterpret_cast<void*>(&::sym),
#include "driver/cuda_used.def"
#undef GMS_USED
};

[[maybe_unused]] const bool g_fault_configured = (fake_fault::configure(kNames, g_calls, kCount), true);

// Streams a test has declared captured (fake_cuda_set_capturing): the stand-in records no graph,
// but answers cuStreamIsCapturing and refuses what the driver refuses on a capturing stream.
std::atomic<CUstream> g_capturing{reinterpret_cast<CUstream>(~uintptr_t{0})};
inline bool capturing(CUstream s) { return s == g_capturing.load(std::memory_order_relaxed); }

struct Proc {
  const char* base;
  int version;
  Id impl;
  int per_thread;  // an Id, or -1
};
const Proc kProcs[] = {
#define FAKE_PROC(base, version, impl) {#base, version, k_##impl, -1},
#define FAKE_PROC_PT(base, version, impl, pt) {#base, version, k_##impl, k_##pt},
#include "proc_table.def"
#undef FAKE_PROC
#undef FAKE_PROC_PT
};

}  // namespace

// ---- state ---------------------------------------------------------------------------------------

namespace {

std::atomic<bool> g_init{false};
thread_local CUcontext t_ctx = nullptr;
std::atomic<uintptr_t> g_next_stream{1};
int g_default_pool_token;

}  // namespace

namespace fake_internal {

FakeCtx g_primary_ctx{0};

CUresult need_init() { return g_init.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }
CUresult need_ctx() {
  if (!g_init.load()) return CUDA_ERROR_NOT_INITIALIZED;
  return t_ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace fake_internal

// ---- test-only interface ---------------------------------------------------------------------------

FAKE_EXPORT unsigned long fake_cuda_calls(const char* symbol) {
  unsigned long total = 0;
  for (int i = 0; i < kCount; ++i) {
    unsigned long n = g_calls[i].load(std::memory_order_relaxed);
    if (!symbol) {
      total += n;
    } else if (std::strcmp(symbol, kNames[i]) == 0) {
      return n;
    }
  }
  return symbol ? ULONG_MAX : total;
}

FAKE_EXPORT unsigned long fake_cuda_last_call(const char* symbol) {
  for (int i = 0; i < kCount; ++i) {
    if (std::strcmp(symbol, kNames[i]) == 0) return g_last_seq[i].load(std::memory_order_relaxed);
  }
  return ULONG_MAX;
}

FAKE_EXPORT void fake_cuda_set_capturing(CUstream s, int on) {
  g_capturing.store(on ? s : reinterpret_cast<CUstream>(~uintptr_t{0}), std::memory_order_relaxed);
}

namespace {
std::atomic<bool> g_events_busy{false};
}  // namespace

FAKE_EXPORT void fake_cuda_set_events_busy(int on) { g_events_busy.store(on != 0); }

// ---- initialisation, device, context, stream -------------------------------------------------------

FAKE_IMPL(cuInit)(unsigned int flags) {
  FAKE_ENTER(k_cuInit);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  g_init.store(true);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDriverGetVersion)(int* v) {
  FAKE_ENTER(k_cuDriverGetVersion);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = FAKE_CUDA_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDeviceGet)(CUdevice* dev, int ordinal) {
  FAKE_ENTER(k_cuDeviceGet);
  FAKE_TRY(need_init());
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = 0;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDeviceGetCount)(int* n) {
  FAKE_ENTER(k_cuDeviceGetCount);
  FAKE_TRY(need_init());
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = 1;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDeviceGetName)(char* name, int len, CUdevice dev) {
  FAKE_ENTER(k_cuDeviceGetName);
  FAKE_TRY(need_init());
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  static const char kName[] = "gpumemshim fake device (host memory)";
  std::strncpy(name, kName, static_cast<size_t>(len));
  name[len - 1] = '\0';
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDeviceTotalMem_v2)(size_t* bytes, CUdevice dev) {
  FAKE_ENTER(k_cuDeviceTotalMem_v2);
  FAKE_TRY(need_init());
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = kTotalMem;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDeviceGetAttribute)(int* pi, CUdevice_attribute attr, CUdevice dev) {
  FAKE_ENTER(k_cuDeviceGetAttribute);
  FAKE_TRY(need_init());
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      *pi = 1;
      break;
    default:
      *pi = 0;
      break;
  }
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDeviceGetDefaultMemPool)(CUmemoryPool* pool, CUdevice dev) {
  FAKE_ENTER(k_cuDeviceGetDefaultMemPool);
  FAKE_TRY(need_init());
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(&g_default_pool_token);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice dev) {
  FAKE_ENTER(k_cuDevicePrimaryCtxRetain);
  FAKE_TRY(need_init());
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = reinterpret_cast<CUcontext>(&g_primary_ctx);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuDevicePrimaryCtxRelease)(CUdevice dev) {
  FAKE_ENTER(k_cuDevicePrimaryCtxRelease);
  FAKE_TRY(need_init());
  return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

FAKE_IMPL(cuDevicePrimaryCtxRelease_v2)(CUdevice dev) {
  FAKE_ENTER(k_cuDevicePrimaryCtxRelease_v2);
  FAKE_TRY(need_init());
  return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

FAKE_IMPL(cuCtxSetCurrent)(CUcontext ctx) {
  FAKE_ENTER(k_cuCtxSetCurrent);
  FAKE_TRY(need_init());
  if (ctx && ctx != reinterpret_cast<CUcontext>(&g_primary_ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  t_ctx = ctx;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuCtxGetCurrent)(CUcontext* ctx) {
  FAKE_ENTER(k_cuCtxGetCurrent);
  FAKE_TRY(need_init());
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = t_ctx;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuCtxGetDevice)(CUdevice* dev) {
  FAKE_ENTER(k_cuCtxGetDevice);
  FAKE_TRY(need_ctx());
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  *dev = 0;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuCtxSynchronize)() {
  FAKE_ENTER(k_cuCtxSynchronize);
  run_held();
  return need_ctx();
}

FAKE_IMPL(cuCtxSynchronize_v2)(CUcontext ctx) {
  FAKE_ENTER(k_cuCtxSynchronize_v2);
  run_held();
  return ctx ? need_ctx() : CUDA_ERROR_INVALID_CONTEXT;
}

FAKE_IMPL(cuStreamCreate)(CUstream* s, unsigned int flags) {
  FAKE_ENTER(k_cuStreamCreate);
  FAKE_TRY(need_ctx());
  if (!s || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
  // A handle that is never dereferenced: all work is synchronous.
  *s = reinterpret_cast<CUstream>(0x5100000 + 16 * g_next_stream.fetch_add(1));
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuStreamDestroy_v2)(CUstream s) {
  FAKE_ENTER(k_cuStreamDestroy_v2);
  FAKE_TRY(need_ctx());
  return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FAKE_IMPL(cuStreamSynchronize)(CUstream s) {
  FAKE_ENTER(k_cuStreamSynchronize);
  if (capturing(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // and the real one ends the capture
  run_held();
  return need_ctx();
}

FAKE_IMPL(cuStreamSynchronize_ptsz)(CUstream s) {
  FAKE_ENTER(k_cuStreamSynchronize_ptsz);
  if (capturing(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  run_held();
  return need_ctx();
}

namespace {
std::map<CUevent, uint64_t>& event_marks() {  // event -> the last held copy before its record
  static auto* m = new std::map<CUevent, uint64_t>;
  return *m;
}
}  // namespace

// Work completes inside each call (copies are memcpy, kernels run synchronously), except copies
// held back by fake_cuda_set_defer: an event completes the held copies before its record. A handle
// is just a counter.
FAKE_IMPL(cuEventCreate)(CUevent* ev, unsigned int) {
  FAKE_ENTER(k_cuEventCreate);
  FAKE_TRY(need_ctx());
  if (!ev) return CUDA_ERROR_INVALID_VALUE;
  static std::atomic<uintptr_t> next{1};
  *ev = reinterpret_cast<CUevent>(next.fetch_add(1) * 16);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuEventRecord)(CUevent ev, CUstream) {
  FAKE_ENTER(k_cuEventRecord);
  FAKE_TRY(need_ctx());
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(g_held_mu);
  event_marks()[ev] = g_held_seq;
  return CUDA_SUCCESS;
}

namespace {
// Completes what was held before the event's record (or everything, for an event never recorded).
CUresult event_done(CUevent ev) {
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t upto = UINT64_MAX;
  {
    std::lock_guard<std::mutex> lock(g_held_mu);
    auto it = event_marks().find(ev);
    if (it != event_marks().end()) upto = it->second;
  }
  run_held(upto);
  return CUDA_SUCCESS;
}
}  // namespace

FAKE_IMPL(cuEventSynchronize)(CUevent ev) {
  FAKE_ENTER(k_cuEventSynchronize);
  return event_done(ev);
}

FAKE_IMPL(cuEventQuery)(CUevent ev) {
  FAKE_ENTER(k_cuEventQuery);
  if (g_events_busy.load()) return ev ? CUDA_ERROR_NOT_READY : CUDA_ERROR_INVALID_HANDLE;
  return event_done(ev);
}

// Work on every stream is complete when its call returns (held copies aside), so a wait is only
// checked and counted.
FAKE_IMPL(cuStreamWaitEvent)(CUstream, CUevent ev, unsigned int) {
  FAKE_ENTER(k_cuStreamWaitEvent);
  FAKE_TRY(need_ctx());
  return ev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FAKE_IMPL(cuEventDestroy_v2)(CUevent ev) {
  FAKE_ENTER(k_cuEventDestroy_v2);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(g_held_mu);
  event_marks().erase(ev);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuStreamIsCapturing)(CUstream s, CUstreamCaptureStatus* st) {
  FAKE_ENTER(k_cuStreamIsCapturing);
  FAKE_TRY(need_ctx());
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  *st = capturing(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuStreamIsCapturing_ptsz)(CUstream s, CUstreamCaptureStatus* st) {
  FAKE_ENTER(k_cuStreamIsCapturing_ptsz);
  FAKE_TRY(need_ctx());
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  *st = capturing(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuGetErrorString)(CUresult e, const char** s) {
  FAKE_ENTER(k_cuGetErrorString);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  switch (e) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "initialization error"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "invalid device context"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "operation not supported"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "invalid resource handle"; break;
    default: *s = "unknown error"; break;
  }
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuGetErrorName)(CUresult e, const char** s) {
  FAKE_ENTER(k_cuGetErrorName);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}

// ---- cuGetProcAddress -------------------------------------------------------------------------------

namespace {

CUresult proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                      CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn || (flags & ~static_cast<cuuint64_t>(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                                          CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pfn = nullptr;
  const Proc* best = nullptr;
  bool known = false;
  for (const Proc& p : kProcs) {
    if (p.version > FAKE_CUDA_DRIVER_VERSION || std::strcmp(p.base, symbol) != 0) continue;
    known = true;
    if (p.version <= version && (!best || p.version > best->version)) best = &p;
  }
  if (!best) {
    if (status) *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  int id = best->impl;
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->per_thread >= 0) id = best->per_thread;
  *pfn = kImpl[id];
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_IMPL(cuGetProcAddress)(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  FAKE_ENTER(k_cuGetProcAddress);
  return proc_address(symbol, pfn, version, flags, nullptr);
}

FAKE_IMPL(cuGetProcAddress_v2)(const char* symbol, void** pfn, int version, cuuint64_t flags,
                               CUdriverProcAddressQueryResult* status) {
  FAKE_ENTER(k_cuGetProcAddress_v2);
  return proc_address(symbol, pfn, version, flags, status);
}

// Context limits: kept, never acted on. The malloc heap starts at the real driver's 8 MiB.
namespace {
std::mutex g_limit_mu;
size_t g_limits[CU_LIMIT_MAX] = {1024, 1 << 20, 8 << 20};
}  // namespace

FAKE_IMPL(cuCtxSetLimit)(CUlimit limit, size_t value) {
  FAKE_ENTER(k_cuCtxSetLimit);
  FAKE_TRY(need_ctx());
  if (limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  std::lock_guard<std::mutex> lock(g_limit_mu);
  g_limits[limit] = value;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuCtxGetLimit)(size_t* value, CUlimit limit) {
  FAKE_ENTER(k_cuCtxGetLimit);
  FAKE_TRY(need_ctx());
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  std::lock_guard<std::mutex> lock(g_limit_mu);
  *value = g_limits[limit];
  return CUDA_SUCCESS;
}
