#pragma once
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
//
// The stand-in is built from five parts, one concern each: fake_cuda.cc (the registry of
// implementations, initialisation, device, context, stream, event, error strings, cuGetProcAddress),
// fake_memory.cc (the memory the driver knows: allocation, pointer queries, unified-memory hints),
// fake_copy.cc (copies, memsets, held-back copies), fake_vmm.cc (virtual memory management) and
// fake_launch.cc (kernel parameters, launches, texture objects). This header declares what more than
// one part uses, in namespace fake_internal; what one part alone uses stays in its anonymous
// namespace. Both are hidden (-fvisibility=hidden): only FAKE_EXPORT definitions are exported.

#ifndef FAKE_CUDA_DRIVER_VERSION
#define FAKE_CUDA_DRIVER_VERSION 13000
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>

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
#define FAKE_IMPL(sym) FAKE_EXPORT CUresult sym
// A call and its per-thread-default-stream form (_ptds or _ptsz): one body, each counted by its own name.
#define FAKE_PAIR(a, b, params, ...) \
  FAKE_IMPL(a) params {              \
    FAKE_ENTER(k_##a);               \
    __VA_ARGS__                      \
  }                                  \
  FAKE_IMPL(b) params {              \
    FAKE_ENTER(k_##b);               \
    __VA_ARGS__                      \
  }
#define FAKE_TRY(expr)                        \
  do {                                        \
    CUresult fake_r_ = (expr);                \
    if (fake_r_ != CUDA_SUCCESS) return fake_r_; \
  } while (0)

namespace fake_internal {

enum Id : int {
#define GMS_HOOK(sym, pfn, family) k_##sym,
#include "driver/cuda_hooks.def"
#undef GMS_HOOK
#define FAKE_FN(sym, pfn) k_##sym,
#include "fake_extra.def"
#undef FAKE_FN
  kCount
};

extern std::atomic<unsigned long> g_calls[kCount];
extern std::atomic<unsigned long> g_last_seq[kCount];  // when each implementation was last called
extern std::atomic<unsigned long> g_seq;
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

// The checks that start most implementations (fake_cuda.cc).
CUresult need_init();
CUresult need_ctx();

// ---- state: the context (fake_cuda.cc), the memory the driver knows (fake_memory.cc) -------------

constexpr size_t kTotalMem = 16ull << 30;

struct FakeCtx {
  int device;
};
extern FakeCtx g_primary_ctx;

enum class Kind { device, managed, pinned, registered, vmm };
struct Block {
  uintptr_t base;
  size_t size;
  size_t map_len;  // what to munmap (0: not ours to unmap)
  Kind kind;
  int fd = -1;          // vmm: the memory mapped there (fake_cuda_physical)
  size_t offset = 0;
};

extern std::mutex g_mu;
std::map<uintptr_t, Block>& blocks();

// Raw system calls: nothing an LD_PRELOAD hook or a sanitizer interceptor sees.
void* raw_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off);
void raw_munmap(void* addr, size_t len);

// The block containing [p, p+n), if any.
bool find_block(uintptr_t p, size_t n, Block* out);

inline void* dp(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// ---- held-back copies (fake_cuda_set_defer; fake_copy.cc) ----------------------------------------

extern std::mutex g_held_mu;
extern uint64_t g_held_seq;  // under g_held_mu

// Runs the held copies up to and including sequence number `upto`, in order.
void run_held(uint64_t upto = UINT64_MAX);

// Pinned memory going away while a held copy still reads or writes it: the interposer's bug.
void check_not_held(uintptr_t lo, uintptr_t hi);

}  // namespace fake_internal
