// The chokepoint: how programs get their driver entry points. dlsym (both glibc versions of it)
// and cuGetProcAddress hand out our hook in place of each hooked implementation, routed by the
// pointer the real lookup returned, so every version and stream variant maps to the right hook.
#include <dlfcn.h>
#include <link.h>

#include <cstring>

#include "common.h"
#include "driver/libc.h"

namespace gms::entry {
namespace {

// The definition of `name` in the object `l` itself, if it has one. A link_map is a valid dlsym
// handle only for an object that dlopen returned: for the program's dependencies, the preloaded
// libraries and the vDSO its search list is empty and glibc's lookup crashes. dlopen(RTLD_NOLOAD)
// of the same object gives a proper handle (libc's own dlopen: a sanitizer's interceptor may not be
// ready when its runtime resolves interceptors through us); objects loaded at startup are never
// unloaded, and the dlclose balances the count for the others.
void* defined_in(struct link_map* l, const char* name) {
  using open_fn = void* (*)(const char*, int);
  using close_fn = int (*)(void*);
  static open_fn real_open = [] {
    void* p = dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34");
    return reinterpret_cast<open_fn>(p ? p : dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5"));
  }();
  static close_fn real_close = [] {
    void* p = dlvsym(RTLD_NEXT, "dlclose", "GLIBC_2.34");
    return reinterpret_cast<close_fn>(p ? p : dlvsym(RTLD_NEXT, "dlclose", "GLIBC_2.2.5"));
  }();
  if (!l->l_name || !l->l_name[0] || !real_open || !real_close) return nullptr;
  void* h = real_open(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return nullptr;
  void* p = libc::dlsym(h, name);
  real_close(h);
  if (!p) return nullptr;
  // dlsym on an object also searches its dependencies; keep only a definition in l itself.
  Dl_info pi;
  struct link_map* owner = nullptr;
  return dladdr1(p, &pi, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) && owner == l ? p : nullptr;
}

// RTLD_NEXT means "after the caller", and the caller of the real dlsym would be us. So it is
// answered here as glibc would: the first object after the caller's in the load order that defines
// the name. (Sanitizer runtimes resolve their interceptors this way before main.)
void* next_after(void* caller, const char* name) {
  Dl_info info;
  struct link_map* lm = nullptr;
  if (!dladdr1(caller, &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) || !lm) {
    return libc::dlsym(RTLD_DEFAULT, name);
  }
  for (struct link_map* l = lm->l_next; l; l = l->l_next) {
    if (void* p = defined_in(l, name)) return p;
  }
  return nullptr;
}

void* lookup(void* handle, const char* name, void* caller) {
  ShimScope scope;
  void* p = handle == RTLD_NEXT ? next_after(caller, name) : libc::dlsym(handle, name);
  void* routed = driver::route_symbol(name, p);
  if (p && !routed) {
    // Our own exported hook, but no driver behind it: answer as if the symbol did not exist, with
    // a dlerror() that says so (and names the shim), exactly once.
    (void)dlvsym(RTLD_DEFAULT, name, "GPUMEMSHIM_NO_CUDA_DRIVER");
  }
  return routed;
}

template <typename F>
CUresult routed_proc_address(CUresult r, const char* symbol, void** pfn) {
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = driver::route_symbol(symbol, *pfn);
  return r;
}

}  // namespace
}  // namespace gms::entry

using namespace gms;
using namespace gms::entry;

// Programs built against glibc >= 2.34 bind dlsym@GLIBC_2.34, older ones dlsym@GLIBC_2.2.5; both
// must land here (libgpumemshim.map defines the two version nodes).
extern "C" __attribute__((visibility("default"), noinline)) void* gms_dlsym_2_34(void* handle, const char* name) {
  return lookup(handle, name, __builtin_return_address(0));
}
extern "C" __attribute__((visibility("default"), noinline)) void* gms_dlsym_2_2_5(void* handle, const char* name) {
  return lookup(handle, name, __builtin_return_address(0));
}
__asm__(".symver gms_dlsym_2_34, dlsym@@GLIBC_2.34");
__asm__(".symver gms_dlsym_2_2_5, dlsym@GLIBC_2.2.5");

GMS_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  CUresult r = call_real(GMS_REAL(cuGetProcAddress), symbol, pfn, version, flags);
  return routed_proc_address<void>(r, symbol, pfn);
}

GMS_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
  CUresult r = call_real(GMS_REAL(cuGetProcAddress_v2), symbol, pfn, version, flags, status);
  return routed_proc_address<void>(r, symbol, pfn);
}
