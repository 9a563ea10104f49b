#pragma once
// Per-thread recursion guard. While a thread is inside the shim (its own allocations, a call into
// the real driver made by a hook, dlsym resolution), the hooks it re-enters pass straight through:
// memory the driver or the shim allocates for itself is not the application's, and a driver entry
// point that internally reaches another exported entry point must not be counted twice.
namespace gms {

// initial-exec: the library is preloaded, so static TLS is available and access is a single load.
extern thread_local int t_shim_depth __attribute__((tls_model("initial-exec")));

inline bool in_shim() { return t_shim_depth != 0; }

class ShimScope {
 public:
  ShimScope() { ++t_shim_depth; }
  ~ShimScope() { --t_shim_depth; }
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
