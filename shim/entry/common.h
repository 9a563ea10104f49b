#pragma once
// Shared by the hook files. A hook: passes straight through when the thread is already inside the
// shim (a nested entry point reached from the driver, or the shim's own calls), else describes the
// call, hands it to act/ (which decides and carries it out) or to the real driver, and tells
// core/observe what happened. Nothing here may allocate on the fast path.
#include "core/guard.h"
#include "observe/observe.h"
#include "core/runtime.h"
#include "driver/calls.h"

#define GMS_EXPORT extern "C" __attribute__((visibility("default")))

namespace gms::entry {

using driver::call_real;
using driver::current_device;

inline bool ok(CUresult r) { return r == CUDA_SUCCESS; }

// For copy ends the call does not type (cuMemcpy): what the driver says the pointer is.
observe::PtrKind ask_driver(uintptr_t addr);

inline uintptr_t addr(CUdeviceptr p) { return static_cast<uintptr_t>(p); }
inline uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace gms::entry

// Hooks that are nested in another hook (or in the shim itself) only forward.
#define GMS_NESTED(sym, ...) \
  if (::gms::in_shim()) return ::gms::driver::call_real(GMS_REAL(sym), __VA_ARGS__)
