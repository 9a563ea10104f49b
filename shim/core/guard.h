#pragma once
// Per-thread recursion guard. While a thread is inside the shim (its own allocations, a call into
// the real driver made by a hook, dlsym resolution), the hooks it re-enters pass straight through:
// memory the driver or the shim allocates for itself is not the application's, and a driver entry
// point that internally reaches another exported entry point must not be counted twice.
namespace gms {

// initial-exec: the library is preloaded, so static TLS is available and access is a single load.
extern thread_local int t_shim_depth __attribute__((tls_model("initial-exec")));

// no_sanitize("null"): UBSan checks the address of a TLS variable with an `add` and a jump on its
// flags; in an executable, ld relaxes that `add` of the initial-exec offset into an `lea`, which
// sets no flags, so the check fires at random in the unit tests (never in the shared library, where
// nothing is relaxed). A TLS address is never null.
#define GMS_TLS_ACCESS __attribute__((no_sanitize("undefined")))

GMS_TLS_ACCESS inline bool in_shim() { return t_shim_depth != 0; }

class ShimScope {
 public:
  GMS_TLS_ACCESS ShimScope() { ++t_shim_depth; }
  GMS_TLS_ACCESS ~ShimScope() { --t_shim_depth; }
  ShimScope(const ShimScope&) = delete;
  ShimScope& operator=(const ShimScope&) = delete;
};

// Globals that must outlive every other static destructor: the application may still allocate and
// free memory (and so enter our hooks) after our own destructors would have run.
template <typename T>
class NoDestructor {
 public:
  template <typename... Args>
  explicit NoDestructor(Args&&... args) { new (storage_) T(static_cast<Args&&>(args)...); }
  T& operator*() { return *reinterpret_cast<T*>(storage_); }
  T* operator->() { return reinterpret_cast<T*>(storage_); }
  const T* operator->() const { return reinterpret_cast<const T*>(storage_); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace gms
