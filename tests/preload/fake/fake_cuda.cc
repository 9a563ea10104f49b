// A stand-in for libcuda.so.1, for the preload tests: every implementation the shim hooks
// (shim/driver/cuda_hooks.def), exported under its own name with its exact type, plus what a program
// needs around them. "Device" memory is host memory from a private mmap (raw syscalls, so neither the
// shim's nor a sanitizer's mmap hook sees it); copies and memsets run synchronously; a CUfunction is a
// host function `void fn(void** kernelParams)` that the launch calls run at once; CUDA arrays are not
// supported.
//
// Rules that keep the tests honest:
// - Implementations never call one another through exported symbols (static helpers only; the
//   library is linked with -Bsymbolic), so a preloaded shim sees each program call exactly once.
// - Every implementation counts the calls that reach it, by its exported name: fake_cuda_calls().
// - cuGetProcAddress answers from proc_table.def the way the real driver does.
// - Built with FAKE_CUDA_DRIVER_VERSION (e.g. 12060) it stands for an older driver: it reports that
//   version, cuGetProcAddress knows nothing newer, and the link hides the newer implementations
//   (old_driver.map), as an older libcuda.so.1 simply lacks them.
#ifndef FAKE_CUDA_DRIVER_VERSION
#define FAKE_CUDA_DRIVER_VERSION 13000
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "fake_cuda_test.h"
#include "fake_fault.h"

// Each implementation is declared with the PFN type of the driver it stands in for: a definition
// below with a different signature does not compile.
#define GMS_HOOK(sym, pfn, family) extern "C" std::remove_pointer_t<pfn> sym;
#include "driver/cuda_hooks.def"
#undef GMS_HOOK
#define GMS_USED(sym, pfn) extern "C" std::remove_pointer_t<pfn> sym;
#include "driver/cuda_used.def"
#undef GMS_USED
#define FAKE_FN(sym, pfn) extern "C" std::remove_pointer_t<pfn> sym;
#include "fake_extra.def"
#undef FAKE_FN

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum Id : int {
#define GMS_HOOK(sym, pfn, family) k_##sym,
#include "driver/cuda_hooks.def"
#undef GMS_HOOK
#define FAKE_FN(sym, pfn) k_##sym,
#include "fake_extra.def"
#undef FAKE_FN
  kCount
};

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

std::atomic<unsigned long> g_calls[kCount];
std::atomic<unsigned long> g_last_seq[kCount];  // when each implementation was last called
std::atomic<unsigned long> g_seq{0};
// Returns which call of `id` this is (1 for the first).
inline unsigned long count(Id id) {
  g_last_seq[id].store(g_seq.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return g_calls[id].fetch_add(1, std::memory_order_relaxed) + 1;
}
// Every implementation starts here: counted, and failed when fake_fault says so (FAKE_CUDA_FAIL).
#define FAKE_ENTER(id)                                                                      \
  do {                                                                                      \
    if (fake_fault::hit(id, count(id))) return static_cast<CUresult>(fake_fault::g_code); \
  } while (0)
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

// ---- state ---------------------------------------------------------------------------------------

constexpr size_t kTotalMem = 16ull << 30;
constexpr size_t kGranularity = 2ull << 20;
constexpr size_t kPitchAlign = 512;

std::atomic<bool> g_init{false};
struct FakeCtx {
  int device;
} g_primary_ctx{0};
thread_local CUcontext t_ctx = nullptr;
std::atomic<size_t> g_device_used{0};
std::atomic<uintptr_t> g_next_stream{1};
int g_default_pool_token;

enum class Kind { device, managed, pinned, registered, vmm };
struct Block {
  uintptr_t base;
  size_t size;
  size_t map_len;  // what to munmap (0: not ours to unmap)
  Kind kind;
  int fd = -1;          // vmm: the memory mapped there (fake_cuda_physical)
  size_t offset = 0;
};
struct Reservation {
  size_t size;
};
struct VmmHandle {
  int fd;
  size_t size;
  bool host = false;  // host-located (CU_MEM_LOCATION_TYPE_HOST / HOST_NUMA)
  unsigned types = 0;  // requestedHandleTypes
  int refs = 1;       // cuMemRetainAllocationHandle adds one, cuMemRelease takes one
};

std::mutex g_mu;
// Leaked on purpose: they must outlive every static destructor that might still call the driver.
std::map<uintptr_t, Block>& blocks() {
  static auto* m = new std::map<uintptr_t, Block>;
  return *m;
}
std::map<uintptr_t, Reservation>& reservations() {
  static auto* m = new std::map<uintptr_t, Reservation>;
  return *m;
}
// Parameter layouts of host "kernels", for cuFuncGetParamInfo (registered by tests).
struct ParamLayout {
  size_t count;
  size_t sizes[16];
};
std::map<uintptr_t, ParamLayout>& kernel_params() {
  static auto* m = new std::map<uintptr_t, ParamLayout>;
  return *m;
}
std::map<unsigned long long, VmmHandle>& vmm_handles() {
  static auto* m = new std::map<unsigned long long, VmmHandle>;
  return *m;
}

size_t page_round(size_t n) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) & ~(page - 1);
}

// Raw system calls: nothing an LD_PRELOAD hook or a sanitizer interceptor sees.
void* raw_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  return r == -1 ? nullptr : reinterpret_cast<void*>(r);
}
void raw_munmap(void* addr, size_t len) { syscall(SYS_munmap, addr, len); }

// The block containing [p, p+n), if any.
bool find_block(uintptr_t p, size_t n, Block* out) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = blocks();
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  const Block& b = it->second;
  if (p < b.base || p + (n ? n : 1) > b.base + b.size) return false;
  if (out) *out = b;
  return true;
}

// ---- held-back copies (fake_cuda_set_defer) ------------------------------------------------------
// A GPU's copy engine reads or writes pinned memory when it gets to the copy, not when the call
// returns. With deferral on, async copies whose host side is pinned or registered wait here until
// the program may rely on them: a synchronisation of a stream or the context, of an event recorded
// after them, or any other copy, memset or launch (stream order, kept conservatively: one queue).
// An interposer that returns from a pageable copy before the copy engine is done with the
// program's buffer then copies the wrong bytes, as it would on a GPU.
struct Held {
  void* dst;
  const void* src;
  size_t n;
  uint64_t seq;
};
std::mutex g_held_mu;
std::atomic<bool> g_defer{false};
uint64_t g_held_seq = 0;  // under g_held_mu
std::vector<Held>& held() {
  static auto* v = new std::vector<Held>;
  return *v;
}
std::map<CUevent, uint64_t>& event_marks() {  // event -> the last held copy before its record
  static auto* m = new std::map<CUevent, uint64_t>;
  return *m;
}

// Runs the held copies up to and including sequence number `upto`, in order.
void run_held(uint64_t upto = UINT64_MAX) {
  std::lock_guard<std::mutex> lock(g_held_mu);
  auto& v = held();
  size_t k = 0;
  for (; k < v.size() && v[k].seq <= upto; ++k) std::memmove(v[k].dst, v[k].src, v[k].n);
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k));
}

// Pinned memory going away while a held copy still reads or writes it: the interposer's bug.
void check_not_held(uintptr_t lo, uintptr_t hi) {
  std::lock_guard<std::mutex> lock(g_held_mu);
  for (const Held& h : held()) {
    for (const void* p : {static_cast<const void*>(h.dst), h.src}) {
      auto a = reinterpret_cast<uintptr_t>(p);
      if (a < hi && a + h.n > lo) {
        std::fprintf(stderr, "fake_cuda: pinned memory at %#lx freed or unregistered while a copy still uses it\n",
                     static_cast<unsigned long>(lo));
        std::abort();
      }
    }
  }
}

CUresult new_block(size_t size, Kind kind, uintptr_t* out) {
  size_t len = page_round(size ? size : 1);
  void* p = raw_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  auto base = reinterpret_cast<uintptr_t>(p);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    blocks()[base] = Block{base, size, len, kind};
  }
  if (kind == Kind::device || kind == Kind::managed) g_device_used.fetch_add(size);
  *out = base;
  return CUDA_SUCCESS;
}

// Frees the block that starts exactly at base if its kind is one of `a` or `b`.
bool drop_block(uintptr_t base, Kind a, Kind b) {
  Block blk;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = blocks().find(base);
    if (it == blocks().end() || (it->second.kind != a && it->second.kind != b)) return false;
    blk = it->second;
    blocks().erase(it);
  }
  if (blk.kind == Kind::device || blk.kind == Kind::managed) g_device_used.fetch_sub(blk.size);
  if (blk.map_len) raw_munmap(reinterpret_cast<void*>(blk.base), blk.map_len);
  return true;
}

CUresult need_init() { return g_init.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }
CUresult need_ctx() {
  if (!g_init.load()) return CUDA_ERROR_NOT_INITIALIZED;
  return t_ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
#define FAKE_TRY(expr)                        \
  do {                                        \
    CUresult fake_r_ = (expr);                \
    if (fake_r_ != CUDA_SUCCESS) return fake_r_; \
  } while (0)

// ---- memory --------------------------------------------------------------------------------------

// `stream_ctx`: a stream-ordered call on a created stream, which names its context itself (the real
// driver takes those with no context current, as PyTorch's autograd thread makes them).
CUresult mem_alloc(CUdeviceptr* dptr, size_t bytes, Kind kind, bool stream_ctx = false) {
  FAKE_TRY(stream_ctx ? need_init() : need_ctx());
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (g_device_used.load() + bytes > kTotalMem) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t p = 0;
  FAKE_TRY(new_block(bytes, kind, &p));
  *dptr = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult mem_free(CUdeviceptr p, bool stream_ctx = false) {
  FAKE_TRY(stream_ctx ? need_init() : need_ctx());
  if (p == 0) return CUDA_SUCCESS;  // like cudaFree(NULL)
  return drop_block(static_cast<uintptr_t>(p), Kind::device, Kind::managed) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult host_alloc(void** pp, size_t bytes) {
  FAKE_TRY(need_ctx());
  if (!pp || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t p = 0;
  FAKE_TRY(new_block(bytes, Kind::pinned, &p));
  *pp = reinterpret_cast<void*>(p);
  return CUDA_SUCCESS;
}

CUresult host_register(void* p, size_t bytes) {
  FAKE_TRY(need_ctx());
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto base = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = blocks();
  auto it = m.upper_bound(base + bytes - 1);
  if (it != m.begin()) {
    --it;
    if (it->second.base + it->second.size > base) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  m[base] = Block{base, bytes, 0, Kind::registered};
  return CUDA_SUCCESS;
}

CUresult host_unregister(void* p) {
  FAKE_TRY(need_ctx());
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  if (find_block(reinterpret_cast<uintptr_t>(p), 1, &b)) check_not_held(b.base, b.base + b.size);
  return drop_block(reinterpret_cast<uintptr_t>(p), Kind::registered, Kind::registered)
             ? CUDA_SUCCESS
             : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

// The device side of a typed copy or a memset must be memory the driver knows (with unified
// addressing, pinned and registered host memory is addressable from the device too).
// As on a GPU, a copy may span neighbouring mappings (the chunks of a VMM range), as long as every
// byte of it is mapped.
CUresult device_range(CUdeviceptr p, size_t n) {
  if (p == 0) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t at = static_cast<uintptr_t>(p);
  const uintptr_t end = at + (n ? n : 1);
  while (at < end) {
    Block b;
    if (!find_block(at, 1, &b)) return CUDA_ERROR_INVALID_VALUE;
    at = b.base + b.size;
  }
  return CUDA_SUCCESS;
}

CUresult copy(void* dst, const void* src, size_t n) {
  FAKE_TRY(need_ctx());
  run_held();
  if (n == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(dst, src, n);
  return CUDA_SUCCESS;
}
void* dp(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

CUresult htod(CUdeviceptr d, const void* s, size_t n) {
  if (n) FAKE_TRY(device_range(d, n));
  return copy(dp(d), s, n);
}
CUresult dtoh(void* d, CUdeviceptr s, size_t n) {
  if (n) FAKE_TRY(device_range(s, n));
  return copy(d, dp(s), n);
}

std::atomic<void (*)(void*)> g_before_async{nullptr};
void* g_before_async_arg = nullptr;

// An async copy: held back when deferral is on and its host side starts in pinned or registered memory.
CUresult async_copy(void* dst, const void* src, size_t n, const void* host, CUdeviceptr dev) {
  if (auto fn = g_before_async.exchange(nullptr)) fn(g_before_async_arg);
  Block b;
  // As the driver does, the start of the host range decides.
  if (!g_defer.load() || n == 0 || !find_block(reinterpret_cast<uintptr_t>(host), 1, &b) ||
      (b.kind != Kind::pinned && b.kind != Kind::registered)) {
    return copy(dst, src, n);
  }
  FAKE_TRY(need_ctx());
  FAKE_TRY(device_range(dev, n));
  std::lock_guard<std::mutex> lock(g_held_mu);
  held().push_back(Held{dst, src, n, ++g_held_seq});
  return CUDA_SUCCESS;
}
CUresult htod_async(CUdeviceptr d, const void* s, size_t n) { return async_copy(dp(d), s, n, s, d); }
CUresult dtoh_async(void* d, CUdeviceptr s, size_t n) { return async_copy(d, dp(s), n, d, s); }
CUresult dtod(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (n) {
    FAKE_TRY(device_range(d, n));
    FAKE_TRY(device_range(s, n));
  }
  return copy(dp(d), dp(s), n);
}
// cuMemcpy and friends: unified addressing, any pointer will do.
CUresult any_copy(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(dp(d), dp(s), n); }
CUresult peer_copy(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  if (!dc || !sc) return CUDA_ERROR_INVALID_CONTEXT;
  return dtod(d, s, n);
}

CUresult operand(CUmemorytype type, const void* host, CUdeviceptr dev, unsigned char** out) {
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      *out = static_cast<unsigned char*>(const_cast<void*>(host));
      break;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
      *out = static_cast<unsigned char*>(dp(dev));
      break;
    case CU_MEMORYTYPE_ARRAY:
      return CUDA_ERROR_NOT_SUPPORTED;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult copy_2d(const CUDA_MEMCPY2D* c) {
  FAKE_TRY(need_ctx());
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  unsigned char *src = nullptr, *dst = nullptr;
  FAKE_TRY(operand(c->srcMemoryType, c->srcHost, c->srcDevice, &src));
  FAKE_TRY(operand(c->dstMemoryType, c->dstHost, c->dstDevice, &dst));
  if (c->Height > 1 && (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t y = 0; y < c->Height; ++y) {
    std::memmove(dst + (c->dstY + y) * c->dstPitch + c->dstXInBytes, src + (c->srcY + y) * c->srcPitch + c->srcXInBytes,
                 c->WidthInBytes);
  }
  return CUDA_SUCCESS;
}

template <typename C>
CUresult copy_3d(const C* c) {
  FAKE_TRY(need_ctx());
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  unsigned char *src = nullptr, *dst = nullptr;
  FAKE_TRY(operand(c->srcMemoryType, c->srcHost, c->srcDevice, &src));
  FAKE_TRY(operand(c->dstMemoryType, c->dstHost, c->dstDevice, &dst));
  if (c->Height > 1 && (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes)) return CUDA_ERROR_INVALID_VALUE;
  if (c->Depth > 1 && (c->srcHeight < c->Height || c->dstHeight < c->Height)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t z = 0; z < c->Depth; ++z) {
    for (size_t y = 0; y < c->Height; ++y) {
      size_t so = ((c->srcZ + z) * c->srcHeight + c->srcY + y) * c->srcPitch + c->srcXInBytes;
      size_t doff = ((c->dstZ + z) * c->dstHeight + c->dstY + y) * c->dstPitch + c->dstXInBytes;
      std::memmove(dst + doff, src + so, c->WidthInBytes);
    }
  }
  return CUDA_SUCCESS;
}

CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER* c) {
  if (c && (!c->srcContext || !c->dstContext)) return CUDA_ERROR_INVALID_CONTEXT;
  return copy_3d(c);
}

CUresult batch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
               size_t* attr_idx, size_t num_attrs, size_t* fail, CUstream stream) {
  FAKE_TRY(need_ctx());
  if (fail) *fail = SIZE_MAX;
  if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attr_idx || num_attrs == 0 || num_attrs > count ||
      attr_idx[0] != 0 || !stream) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < num_attrs; ++i) {
    if (attrs[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    CUresult r = copy(dp(dsts[i]), dp(srcs[i]), sizes[i]);
    if (r != CUDA_SUCCESS) {
      if (fail) *fail = i;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

CUresult batch_3d(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail, unsigned long long flags, CUstream stream) {
  FAKE_TRY(need_ctx());
  if (fail) *fail = SIZE_MAX;
  if (n == 0 || !ops || flags != 0 || !stream) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) {
    const CUDA_MEMCPY3D_BATCH_OP& op = ops[i];
    if (op.src.type != CU_MEMCPY_OPERAND_TYPE_POINTER || op.dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER) {
      if (fail) *fail = i;
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    const CUextent3D& e = op.extent;
    if (!e.width || !e.height || !e.depth || op.srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) {
      if (fail) *fail = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Pointer to pointer: the element is one byte; zero row length or layer height means packed.
    size_t srow = op.src.op.ptr.rowLength ? op.src.op.ptr.rowLength : e.width;
    size_t slayer = op.src.op.ptr.layerHeight ? op.src.op.ptr.layerHeight : e.height;
    size_t drow = op.dst.op.ptr.rowLength ? op.dst.op.ptr.rowLength : e.width;
    size_t dlayer = op.dst.op.ptr.layerHeight ? op.dst.op.ptr.layerHeight : e.height;
    auto* s = static_cast<unsigned char*>(dp(op.src.op.ptr.ptr));
    auto* d = static_cast<unsigned char*>(dp(op.dst.op.ptr.ptr));
    if (!s || !d) {
      if (fail) *fail = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t z = 0; z < e.depth; ++z) {
      for (size_t y = 0; y < e.height; ++y) {
        std::memmove(d + (z * dlayer + y) * drow, s + (z * slayer + y) * srow, e.width);
      }
    }
  }
  return CUDA_SUCCESS;
}

template <typename T>
CUresult fill(CUdeviceptr d, T v, size_t n) {
  FAKE_TRY(need_ctx());
  run_held();
  if (n == 0) return CUDA_SUCCESS;
  if (d % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  FAKE_TRY(device_range(d, n * sizeof(T)));
  T* p = static_cast<T*>(dp(d));
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return CUDA_SUCCESS;
}

template <typename T>
CUresult fill_2d(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h) {
  FAKE_TRY(need_ctx());
  run_held();
  if (w == 0 || h == 0) return CUDA_SUCCESS;
  if (d % sizeof(T) != 0 || (h > 1 && pitch < w * sizeof(T))) return CUDA_ERROR_INVALID_VALUE;
  FAKE_TRY(device_range(d, (h - 1) * pitch + w * sizeof(T)));
  for (size_t y = 0; y < h; ++y) {
    T* row = reinterpret_cast<T*>(static_cast<unsigned char*>(dp(d)) + y * pitch);
    for (size_t x = 0; x < w; ++x) row[x] = v;
  }
  return CUDA_SUCCESS;
}

CUresult managed_range(CUdeviceptr p, size_t n) {
  FAKE_TRY(need_ctx());
  Block b;
  if (!find_block(static_cast<uintptr_t>(p), n, &b) || b.kind != Kind::managed) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

using HostKernel = void (*)(void**);
CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                void** params) {
  FAKE_TRY(need_ctx());
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  run_held();
  if (!gx || !gy || !gz || !bx || !by || !bz) return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<HostKernel>(f)(params);
  return CUDA_SUCCESS;
}
CUresult launch_ex(const CUlaunchConfig* c, CUfunction f, void** params) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, params);
}

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

FAKE_EXPORT void fake_cuda_before_next_async_copy(void (*fn)(void*), void* arg) {
  g_before_async_arg = arg;
  g_before_async.store(fn);
}

std::atomic<bool> g_events_busy{false};

FAKE_EXPORT void fake_cuda_set_events_busy(int on) { g_events_busy.store(on != 0); }

std::atomic<int> g_fail_device_creates{0};
FAKE_EXPORT void fake_cuda_fail_device_creates(int n) { g_fail_device_creates.store(n); }

FAKE_EXPORT void fake_cuda_set_defer(int on) {
  g_defer.store(on != 0);
  if (!on) run_held();
}

FAKE_EXPORT CUdeviceptr fake_cuda_alloc_untracked(size_t bytes) {
  uintptr_t p = 0;
  return new_block(bytes, Kind::device, &p) == CUDA_SUCCESS ? static_cast<CUdeviceptr>(p) : 0;
}

FAKE_EXPORT void* fake_cuda_host_alloc_untracked(size_t bytes) {
  uintptr_t p = 0;
  return new_block(bytes, Kind::pinned, &p) == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
}

FAKE_EXPORT int fake_cuda_set_kernel_params(CUfunction f, const size_t* sizes, size_t count) {
  if (!f || count > 16 || (count && !sizes)) return -1;
  ParamLayout l{count, {}};
  for (size_t i = 0; i < count; ++i) l.sizes[i] = sizes[i];
  std::lock_guard<std::mutex> lock(g_mu);
  kernel_params()[reinterpret_cast<uintptr_t>(f)] = l;
  return 0;
}

// ---- initialisation, device, context, stream -------------------------------------------------------

#define FAKE_IMPL(sym) FAKE_EXPORT CUresult sym

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

// The stand-in has no library-managed kernels: every handle is a CUfunction.
FAKE_IMPL(cuKernelGetParamInfo)(CUkernel, size_t, size_t*, size_t*) {
  FAKE_ENTER(k_cuKernelGetParamInfo);
  return CUDA_ERROR_INVALID_HANDLE;
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

// Offsets are the sizes laid out with natural alignment, as the compiler lays out kernel parameters.
FAKE_IMPL(cuFuncGetParamInfo)(CUfunction f, size_t index, size_t* offset, size_t* size) {
  FAKE_ENTER(k_cuFuncGetParamInfo);
  FAKE_TRY(need_ctx());
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!offset || !size) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = kernel_params().find(reinterpret_cast<uintptr_t>(f));
  // A kernel nobody described is treated as taking no parameters.
  if (it == kernel_params().end() || index >= it->second.count) return CUDA_ERROR_INVALID_VALUE;
  size_t off = 0;
  for (size_t i = 0;; ++i) {
    size_t sz = it->second.sizes[i];
    size_t align = sz >= 8 ? 8 : (sz >= 4 ? 4 : (sz >= 2 ? 2 : 1));
    off = (off + align - 1) / align * align;
    if (i == index) {
      *offset = off;
      *size = sz;
      return CUDA_SUCCESS;
    }
    off += sz;
  }
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

// ---- pointer queries (what the shim itself uses) ------------------------------------------------------

namespace {
CUresult pointer_attribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  FAKE_TRY(need_init());
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  // Like the real driver for pageable memory it never saw.
  if (!find_block(static_cast<uintptr_t>(ptr), 1, &b)) return CUDA_ERROR_INVALID_VALUE;
  bool host = b.kind == Kind::pinned || b.kind == Kind::registered;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned int*>(data) = b.kind == Kind::managed ? 1u : 0u;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *static_cast<void**>(data) = dp(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(&g_primary_ctx);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(b.base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = b.size;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}
}  // namespace

FAKE_IMPL(cuPointerGetAttribute)(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  FAKE_ENTER(k_cuPointerGetAttribute);
  return pointer_attribute(data, attr, ptr);
}

FAKE_IMPL(cuPointerGetAttributes)(unsigned int n, CUpointer_attribute* attrs, void** data, CUdeviceptr ptr) {
  FAKE_ENTER(k_cuPointerGetAttributes);
  FAKE_TRY(need_init());
  if (n == 0 || !attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  const bool known = find_block(static_cast<uintptr_t>(ptr), 1, &b);
  for (unsigned int i = 0; i < n; ++i) {
    if (known) {
      const CUresult r = pointer_attribute(data[i], attrs[i], ptr);
      if (r != CUDA_SUCCESS) return r;
      continue;
    }
    // As the driver: memory it does not know is no error here, but every answer is the default
    // (a device ordinal of -2: what CuPy then fails to set as the current device).
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data[i]) = -2; break;
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<unsigned int*>(data[i]) = 0; break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data[i]) = 0; break;
      default: *static_cast<uintptr_t*>(data[i]) = 0; break;  // pointers, contexts, addresses
    }
  }
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemGetAddressRange_v2)(CUdeviceptr* pbase, size_t* psize, CUdeviceptr ptr) {
  FAKE_ENTER(k_cuMemGetAddressRange_v2);
  FAKE_TRY(need_ctx());
  Block b;
  if (!find_block(static_cast<uintptr_t>(ptr), 1, &b) || b.kind == Kind::pinned || b.kind == Kind::registered) {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (pbase) *pbase = static_cast<CUdeviceptr>(b.base);
  if (psize) *psize = b.size;
  return CUDA_SUCCESS;
}

// As the driver: a legacy IPC handle only for memory cuMemAlloc made.
FAKE_IMPL(cuIpcGetMemHandle)(CUipcMemHandle* handle, CUdeviceptr ptr) {
  FAKE_ENTER(k_cuIpcGetMemHandle);
  FAKE_TRY(need_ctx());
  Block b;
  if (!handle || !find_block(static_cast<uintptr_t>(ptr), 1, &b) || b.kind != Kind::device) return CUDA_ERROR_INVALID_VALUE;
  std::memset(handle, 0, sizeof(*handle));
  std::memcpy(handle->reserved, &b.base, sizeof(b.base));
  return CUDA_SUCCESS;
}

// ---- cuGetProcAddress -------------------------------------------------------------------------------

FAKE_IMPL(cuGetProcAddress)(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  FAKE_ENTER(k_cuGetProcAddress);
  return proc_address(symbol, pfn, version, flags, nullptr);
}

FAKE_IMPL(cuGetProcAddress_v2)(const char* symbol, void** pfn, int version, cuuint64_t flags,
                               CUdriverProcAddressQueryResult* status) {
  FAKE_ENTER(k_cuGetProcAddress_v2);
  return proc_address(symbol, pfn, version, flags, status);
}

// ---- allocation ---------------------------------------------------------------------------------------

FAKE_IMPL(cuMemAlloc_v2)(CUdeviceptr* dptr, size_t bytes) {
  FAKE_ENTER(k_cuMemAlloc_v2);
  return mem_alloc(dptr, bytes, Kind::device);
}

FAKE_IMPL(cuMemAllocPitch_v2)(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int elem) {
  FAKE_ENTER(k_cuMemAllocPitch_v2);
  if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
  size_t p = (width + kPitchAlign - 1) / kPitchAlign * kPitchAlign;
  CUresult r = mem_alloc(dptr, p * height, Kind::device);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

FAKE_IMPL(cuMemAllocManaged)(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  FAKE_ENTER(k_cuMemAllocManaged);
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return mem_alloc(dptr, bytes, Kind::managed);
}

#define FAKE_PAIR(a, b, params, ...) \
  FAKE_IMPL(a) params {              \
    FAKE_ENTER(k_##a);               \
    __VA_ARGS__                      \
  }                                  \
  FAKE_IMPL(b) params {              \
    FAKE_ENTER(k_##b);               \
    __VA_ARGS__                      \
  }

FAKE_PAIR(cuMemAllocAsync, cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytes, CUstream s),
          return mem_alloc(dptr, bytes, Kind::device, s != nullptr);)
FAKE_PAIR(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz,
          (CUdeviceptr * dptr, size_t bytes, CUmemoryPool pool, CUstream),
          if (!pool) return CUDA_ERROR_INVALID_VALUE; return mem_alloc(dptr, bytes, Kind::device);)
FAKE_PAIR(cuMemFreeAsync, cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream s), return mem_free(p, s != nullptr);)

FAKE_IMPL(cuMemFree_v2)(CUdeviceptr p) {
  FAKE_ENTER(k_cuMemFree_v2);
  return mem_free(p);
}

FAKE_IMPL(cuMemHostAlloc)(void** pp, size_t bytes, unsigned int flags) {
  FAKE_ENTER(k_cuMemHostAlloc);
  if (flags & ~static_cast<unsigned>(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return host_alloc(pp, bytes);
}

FAKE_IMPL(cuMemAllocHost_v2)(void** pp, size_t bytes) {
  FAKE_ENTER(k_cuMemAllocHost_v2);
  return host_alloc(pp, bytes);
}

FAKE_IMPL(cuMemFreeHost)(void* p) {
  FAKE_ENTER(k_cuMemFreeHost);
  FAKE_TRY(need_ctx());
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  if (find_block(reinterpret_cast<uintptr_t>(p), 1, &b)) check_not_held(b.base, b.base + b.size);
  return drop_block(reinterpret_cast<uintptr_t>(p), Kind::pinned, Kind::pinned) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_IMPL(cuMemHostRegister)(void* p, size_t bytes, unsigned int) {
  FAKE_ENTER(k_cuMemHostRegister);
  return host_register(p, bytes);
}

FAKE_IMPL(cuMemHostRegister_v2)(void* p, size_t bytes, unsigned int) {
  FAKE_ENTER(k_cuMemHostRegister_v2);
  return host_register(p, bytes);
}

FAKE_IMPL(cuMemHostUnregister)(void* p) {
  FAKE_ENTER(k_cuMemHostUnregister);
  return host_unregister(p);
}

FAKE_IMPL(cuMemHostGetDevicePointer_v2)(CUdeviceptr* pdptr, void* p, unsigned int flags) {
  FAKE_ENTER(k_cuMemHostGetDevicePointer_v2);
  FAKE_TRY(need_ctx());
  if (!pdptr || !p || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  if (!find_block(reinterpret_cast<uintptr_t>(p), 1, &b) || (b.kind != Kind::pinned && b.kind != Kind::registered)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pdptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemGetInfo_v2)(size_t* free_bytes, size_t* total_bytes) {
  FAKE_ENTER(k_cuMemGetInfo_v2);
  FAKE_TRY(need_ctx());
  if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
  *total_bytes = kTotalMem;
  *free_bytes = kTotalMem - g_device_used.load();
  return CUDA_SUCCESS;
}

// ---- virtual memory management --------------------------------------------------------------------------

FAKE_IMPL(cuMemGetAllocationGranularity)(size_t* g, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags) {
  FAKE_ENTER(k_cuMemGetAllocationGranularity);
  FAKE_TRY(need_init());
  if (!g || !prop) return CUDA_ERROR_INVALID_VALUE;
  *g = kGranularity;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemAddressReserve)(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr, unsigned long long) {
  FAKE_ENTER(k_cuMemAddressReserve);
  FAKE_TRY(need_ctx());
  if (!ptr || size == 0 || size % kGranularity) return CUDA_ERROR_INVALID_VALUE;
  void* p = raw_mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  reservations()[reinterpret_cast<uintptr_t>(p)] = Reservation{size};
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemAddressFree)(CUdeviceptr ptr, size_t size) {
  FAKE_ENTER(k_cuMemAddressFree);
  FAKE_TRY(need_ctx());
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = reservations().find(static_cast<uintptr_t>(ptr));
    if (it == reservations().end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
    reservations().erase(it);
  }
  raw_munmap(dp(ptr), size);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemCreate)(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                       unsigned long long flags) {
  FAKE_ENTER(k_cuMemCreate);
  FAKE_TRY(need_ctx());
  if (!handle || !prop || flags != 0 || size == 0 || size % kGranularity || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && g_fail_device_creates.load() > 0) {
    g_fail_device_creates.fetch_sub(1);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  long fd = syscall(SYS_memfd_create, "fakecuda-vmm", 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (syscall(SYS_ftruncate, fd, static_cast<long>(size)) != 0) {
    syscall(SYS_close, fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  unsigned long long h = 0x4d000000ull + static_cast<unsigned long long>(fd);
  std::lock_guard<std::mutex> lock(g_mu);
  const bool host = prop->location.type == CU_MEM_LOCATION_TYPE_HOST || prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
  vmm_handles()[h] = VmmHandle{static_cast<int>(fd), size, host, static_cast<unsigned>(prop->requestedHandleTypes)};
  *handle = h;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemRetainAllocationHandle)(CUmemGenericAllocationHandle* handle, void* addr) {
  FAKE_ENTER(k_cuMemRetainAllocationHandle);
  FAKE_TRY(need_ctx());
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  const auto at = reinterpret_cast<uintptr_t>(addr);
  auto it = blocks().upper_bound(at);
  if (it == blocks().begin()) return CUDA_ERROR_INVALID_VALUE;
  const Block& b = std::prev(it)->second;
  if (b.kind != Kind::vmm || at >= b.base + b.size) return CUDA_ERROR_INVALID_VALUE;
  auto h = vmm_handles().find(0x4d000000ull + static_cast<unsigned long long>(b.fd));
  if (h == vmm_handles().end()) return CUDA_ERROR_INVALID_VALUE;
  ++h->second.refs;
  *handle = h->first;
  return CUDA_SUCCESS;
}

FAKE_EXPORT unsigned fake_cuda_handle_types(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = vmm_handles().find(handle);
  return it == vmm_handles().end() ? 0 : it->second.types;
}

FAKE_EXPORT int fake_cuda_handle_on_host(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = vmm_handles().find(handle);
  return it == vmm_handles().end() ? -1 : it->second.host ? 1 : 0;
}

FAKE_IMPL(cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                    unsigned long long flags) {
  FAKE_ENTER(k_cuMemMap);
  FAKE_TRY(need_ctx());
  if (flags != 0 || size == 0 || size % kGranularity || offset % kGranularity) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto h = vmm_handles().find(handle);
  if (h == vmm_handles().end() || offset + size > h->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto base = static_cast<uintptr_t>(ptr);
  auto r = reservations().upper_bound(base);
  if (r == reservations().begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (base < r->first || base + size > r->first + r->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto& m = blocks();
  auto it = m.upper_bound(base + size - 1);
  if (it != m.begin() && std::prev(it)->second.base + std::prev(it)->second.size > base) return CUDA_ERROR_INVALID_VALUE;
  if (!raw_mmap(dp(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, h->second.fd, static_cast<off_t>(offset))) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  m[base] = Block{base, size, 0, Kind::vmm, h->second.fd, offset};
  return CUDA_SUCCESS;
}

// A kernel on a GPU reaches the memory mapped at an address when it runs, whatever is mapped there
// later: a second mapping of that memory (kept, so it stays valid after an unmap or release).
FAKE_EXPORT void* fake_cuda_physical(CUdeviceptr ptr, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto at = static_cast<uintptr_t>(ptr);
  auto it = blocks().upper_bound(at);
  if (it == blocks().begin()) return nullptr;
  const Block& b = std::prev(it)->second;
  if (b.kind != Kind::vmm || at + n > b.base + b.size) return nullptr;
  const size_t from = b.offset + (at - b.base), page = from / kGranularity * kGranularity;
  void* p = raw_mmap(nullptr, from - page + n, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, static_cast<off_t>(page));
  return p ? static_cast<unsigned char*>(p) + (from - page) : nullptr;
}

// The host word the latest cuStreamWaitValue32 waited on, and the access calls made while it was
// not 0 (fake_cuda_access_calls_gated).
std::atomic<uintptr_t> g_waited_word{0};
std::atomic<unsigned long> g_access_gated{0};
FAKE_EXPORT unsigned long fake_cuda_access_calls_gated() { return g_access_gated.load(); }

CUresult wait_value(CUdeviceptr addr, unsigned int flags) {
  FAKE_TRY(need_ctx());
  Block b;
  // Work runs at once here: the wait has nothing to wait for. The word must be one a GPU can read.
  if (flags != CU_STREAM_WAIT_VALUE_EQ || !find_block(static_cast<uintptr_t>(addr), 4, &b) || b.kind != Kind::pinned) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  g_waited_word.store(static_cast<uintptr_t>(addr));
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuStreamWaitValue32_v2)(CUstream, CUdeviceptr addr, cuuint32_t, unsigned int flags) {
  FAKE_ENTER(k_cuStreamWaitValue32_v2);
  return wait_value(addr, flags);
}

FAKE_IMPL(cuStreamWaitValue32_v2_ptsz)(CUstream, CUdeviceptr addr, cuuint32_t, unsigned int flags) {
  FAKE_ENTER(k_cuStreamWaitValue32_v2_ptsz);
  return wait_value(addr, flags);
}

FAKE_IMPL(cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count_) {
  FAKE_ENTER(k_cuMemSetAccess);
  FAKE_TRY(need_ctx());
  if (const uintptr_t w = g_waited_word.load(); w && __atomic_load_n(reinterpret_cast<const uint32_t*>(w), __ATOMIC_SEQ_CST) != 0) {
    ++g_access_gated;
  }
  if (!desc || count_ == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  // As the driver: the range may span several mappings, back to back, but no unmapped byte.
  std::lock_guard<std::mutex> lock(g_mu);
  uintptr_t at = static_cast<uintptr_t>(ptr), end = at + size;
  while (at < end) {
    auto it = blocks().upper_bound(at);
    if (it == blocks().begin()) return CUDA_ERROR_INVALID_VALUE;
    const Block& b = std::prev(it)->second;
    if (b.kind != Kind::vmm || at < b.base || at >= b.base + b.size) return CUDA_ERROR_INVALID_VALUE;
    at = b.base + b.size;
  }
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemUnmap)(CUdeviceptr ptr, size_t size) {
  FAKE_ENTER(k_cuMemUnmap);
  FAKE_TRY(need_ctx());
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = blocks().find(static_cast<uintptr_t>(ptr));
    if (it == blocks().end() || it->second.kind != Kind::vmm || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
    blocks().erase(it);
  }
  // Back to a reserved, inaccessible range.
  raw_mmap(dp(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemRelease)(CUmemGenericAllocationHandle handle) {
  FAKE_ENTER(k_cuMemRelease);
  FAKE_TRY(need_ctx());
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = vmm_handles().find(handle);
    if (it == vmm_handles().end()) return CUDA_ERROR_INVALID_VALUE;
    if (--it->second.refs > 0) return CUDA_SUCCESS;
    fd = it->second.fd;
    vmm_handles().erase(it);
  }
  syscall(SYS_close, fd);  // mappings made from it stay valid until unmapped, as with the real driver
  return CUDA_SUCCESS;
}

// ---- copies ---------------------------------------------------------------------------------------------

FAKE_PAIR(cuMemcpy, cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), return any_copy(d, s, n);)
FAKE_PAIR(cuMemcpyAsync, cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream),
          return any_copy(d, s, n);)
FAKE_PAIR(cuMemcpyPeer, cuMemcpyPeer_ptds, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n),
          return peer_copy(d, dc, s, sc, n);)
FAKE_PAIR(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz,
          (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream),
          return peer_copy(d, dc, s, sc, n);)
FAKE_PAIR(cuMemcpy3DPeer, cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER* c), return copy_3d_peer(c);)
FAKE_PAIR(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER* c, CUstream),
          return copy_3d_peer(c);)
FAKE_PAIR(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void* s, size_t n), return htod(d, s, n);)
FAKE_PAIR(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, (void* d, CUdeviceptr s, size_t n), return dtoh(d, s, n);)
FAKE_PAIR(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), return dtod(d, s, n);)
FAKE_PAIR(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void* s, size_t n, CUstream),
          return htod_async(d, s, n);)
FAKE_PAIR(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, (void* d, CUdeviceptr s, size_t n, CUstream),
          return dtoh_async(d, s, n);)
FAKE_PAIR(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream),
          return dtod(d, s, n);)
FAKE_PAIR(cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D* c), return copy_2d(c);)
FAKE_PAIR(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D* c), return copy_2d(c);)
FAKE_PAIR(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D* c, CUstream), return copy_2d(c);)
FAKE_PAIR(cuMemcpy3D_v2, cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D* c), return copy_3d(c);)
FAKE_PAIR(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D* c, CUstream), return copy_3d(c);)

// CUDA arrays: not supported by the stand-in.
FAKE_PAIR(cuMemcpyHtoA_v2, cuMemcpyHtoA_v2_ptds, (CUarray, size_t, const void*, size_t), return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyAtoH_v2, cuMemcpyAtoH_v2_ptds, (void*, CUarray, size_t, size_t), return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyDtoA_v2, cuMemcpyDtoA_v2_ptds, (CUarray, size_t, CUdeviceptr, size_t), return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyAtoD_v2, cuMemcpyAtoD_v2_ptds, (CUdeviceptr, CUarray, size_t, size_t), return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyAtoA_v2, cuMemcpyAtoA_v2_ptds, (CUarray, size_t, CUarray, size_t, size_t),
          return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2_ptsz, (CUarray, size_t, const void*, size_t, CUstream),
          return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2_ptsz, (void*, CUarray, size_t, size_t, CUstream),
          return CUDA_ERROR_NOT_SUPPORTED;)

// Batches: CUDA 12.8's form reports a failing index, CUDA 13.0's (_v2) does not.
FAKE_PAIR(cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz,
          (CUdeviceptr * d, CUdeviceptr * s, size_t * n, size_t count_, CUmemcpyAttributes * attrs, size_t * idx,
           size_t num_attrs, size_t * fail, CUstream st),
          return batch(d, s, n, count_, attrs, idx, num_attrs, fail, st);)
FAKE_PAIR(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz,
          (CUdeviceptr * d, CUdeviceptr * s, size_t * n, size_t count_, CUmemcpyAttributes * attrs, size_t * idx,
           size_t num_attrs, CUstream st),
          return batch(d, s, n, count_, attrs, idx, num_attrs, nullptr, st);)
FAKE_PAIR(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_ptsz,
          (size_t n, CUDA_MEMCPY3D_BATCH_OP * ops, size_t * fail, unsigned long long flags, CUstream st),
          return batch_3d(n, ops, fail, flags, st);)
FAKE_PAIR(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz,
          (size_t n, CUDA_MEMCPY3D_BATCH_OP * ops, unsigned long long flags, CUstream st),
          return batch_3d(n, ops, nullptr, flags, st);)

// ---- memsets ------------------------------------------------------------------------------------------

FAKE_PAIR(cuMemsetD8_v2, cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), return fill(d, v, n);)
FAKE_PAIR(cuMemsetD16_v2, cuMemsetD16_v2_ptds, (CUdeviceptr d, unsigned short v, size_t n), return fill(d, v, n);)
FAKE_PAIR(cuMemsetD32_v2, cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned int v, size_t n), return fill(d, v, n);)
FAKE_PAIR(cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds, (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h),
          return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds, (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h),
          return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds, (CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h),
          return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD8Async, cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream),
          return fill(d, v, n);)
FAKE_PAIR(cuMemsetD16Async, cuMemsetD16Async_ptsz, (CUdeviceptr d, unsigned short v, size_t n, CUstream),
          return fill(d, v, n);)
FAKE_PAIR(cuMemsetD32Async, cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream),
          return fill(d, v, n);)
FAKE_PAIR(cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz,
          (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream), return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz,
          (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream), return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz,
          (CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream), return fill_2d(d, p, v, w, h);)

// ---- unified-memory hints ------------------------------------------------------------------------------

FAKE_PAIR(cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz, (CUdeviceptr p, size_t n, CUdevice dev, CUstream),
          if (dev != 0 && dev != CU_DEVICE_CPU) return CUDA_ERROR_INVALID_DEVICE; return managed_range(p, n);)
FAKE_PAIR(cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz,
          (CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream),
          if (flags != 0 || (loc.type != CU_MEM_LOCATION_TYPE_DEVICE && loc.type != CU_MEM_LOCATION_TYPE_HOST))
              return CUDA_ERROR_INVALID_VALUE;
          return managed_range(p, n);)

FAKE_IMPL(cuMemAdvise)(CUdeviceptr p, size_t n, CUmem_advise, CUdevice dev) {
  FAKE_ENTER(k_cuMemAdvise);
  if (dev != 0 && dev != CU_DEVICE_CPU) return CUDA_ERROR_INVALID_DEVICE;
  return managed_range(p, n);
}

FAKE_IMPL(cuMemAdvise_v2)(CUdeviceptr p, size_t n, CUmem_advise, CUmemLocation loc) {
  FAKE_ENTER(k_cuMemAdvise_v2);
  if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE && loc.type != CU_MEM_LOCATION_TYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  return managed_range(p, n);
}

// ---- launches ------------------------------------------------------------------------------------------

FAKE_PAIR(cuLaunchKernel, cuLaunchKernel_ptsz,
          (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned,
           CUstream, void** params, void**),
          return launch(f, gx, gy, gz, bx, by, bz, params);)
FAKE_PAIR(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz,
          (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned,
           CUstream, void** params),
          return launch(f, gx, gy, gz, bx, by, bz, params);)
FAKE_PAIR(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, (const CUlaunchConfig* c, CUfunction f, void** params, void**),
          return launch_ex(c, f, params);)
FAKE_PAIR(cuGraphLaunch, cuGraphLaunch_ptsz, (CUgraphExec g, CUstream),
          FAKE_TRY(need_ctx()); return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;)

// ---- texture objects: linear and pitched only (the stand-in has no CUDA arrays) -------------------

std::map<CUtexObject, CUdeviceptr>& textures() {
  static auto* m = new std::map<CUtexObject, CUdeviceptr>;
  return *m;
}

FAKE_IMPL(cuTexObjectCreate)(CUtexObject* tex, const CUDA_RESOURCE_DESC* res, const CUDA_TEXTURE_DESC*,
                             const CUDA_RESOURCE_VIEW_DESC*) {
  FAKE_ENTER(k_cuTexObjectCreate);
  FAKE_TRY(need_ctx());
  if (!tex || !res) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr at = 0;
  if (res->resType == CU_RESOURCE_TYPE_LINEAR) at = res->res.linear.devPtr;
  else if (res->resType == CU_RESOURCE_TYPE_PITCH2D) at = res->res.pitch2D.devPtr;
  else return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(g_mu);
  // The smallest number not in use, as the real driver reuses its handles.
  CUtexObject t = 1;
  while (textures().count(t)) ++t;
  textures()[t] = at;
  *tex = t;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuTexObjectDestroy)(CUtexObject tex) {
  FAKE_ENTER(k_cuTexObjectDestroy);
  FAKE_TRY(need_ctx());
  std::lock_guard<std::mutex> lock(g_mu);
  return textures().erase(tex) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUdeviceptr fake_cuda_texture_ptr(CUtexObject tex) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = textures().find(tex);
  return it == textures().end() ? 0 : it->second;
}
