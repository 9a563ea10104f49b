#pragma once
// The real CUDA driver, as the shim sees it. Include this (not <cuda.h> directly) in shim code:
// __CUDA_API_VERSION_INTERNAL makes cuda.h declare every implementation under its literal name
// (cuMemAlloc_v2, cuMemAdvise vs cuMemAdvise_v2...), which is what the hooks must define.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

// Each hook has the exact type of the implementation it stands in for; a definition in
// shim/entry/ with a different signature does not compile.
#define GMS_HOOK(sym, pfn, file) extern "C" std::remove_pointer_t<pfn> sym;
#include "cuda_hooks.def"
#undef GMS_HOOK

namespace gms::driver {

enum class Fn : uint16_t {
#define GMS_HOOK(sym, pfn, file) sym,
#include "cuda_hooks.def"
#undef GMS_HOOK
  hook_count,
#define GMS_USED(sym, pfn) sym,
#include "cuda_used.def"
#undef GMS_USED
  count
};
constexpr int kHookCount = static_cast<int>(Fn::hook_count);

template <Fn F>
struct FnType;
#define GMS_HOOK(sym, pfn, file) \
  template <>                    \
  struct FnType<Fn::sym> {       \
    using type = pfn;            \
  };
#include "cuda_hooks.def"
#undef GMS_HOOK
#define GMS_USED(sym, pfn) \
  template <>              \
  struct FnType<Fn::sym> { \
    using type = pfn;      \
  };
#include "cuda_used.def"
#undef GMS_USED

extern void* g_real[static_cast<int>(Fn::count)];
extern std::atomic<bool> g_loaded;

// Finds libcuda.so.1 (already loaded, or loads it) and resolves every implementation once.
// Returns false when there is no driver: hooks then answer CUDA_ERROR_NOT_FOUND.
bool load_slow();
inline bool ensure_loaded() { return g_loaded.load(std::memory_order_acquire) || load_slow(); }

template <Fn F>
typename FnType<F>::type real() {
  ensure_loaded();
  return reinterpret_cast<typename FnType<F>::type>(g_real[static_cast<int>(F)]);
}

// The hook standing in for a pointer the real driver handed out (through dlsym or
// cuGetProcAddress). A pointer that is not a hooked implementation comes back unchanged.
void* route(void* real_ptr);

// What dlsym should answer for a name when the plain lookup gave `found`: the hook for a real
// implementation; nullptr for one of the shim's own exported hooks when the driver lacks that
// implementation (so probing for CUDA stays honest on machines without it); else `found`.
void* route_symbol(const char* name, void* found);

// The handle of the real libcuda (nullptr before load or without a driver).
void* libcuda_handle();

// Forget the driver in a fork child? No: the mapping stays valid; CUDA itself refuses to run in a
// child of a process that initialised it, and the hooks just forward that answer.

}  // namespace gms::driver
