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

// dlsym itself. RTLD_NEXT is answered relative to the caller's object, which glibc finds from the
// return address: so for every name the shim does not route (everything but "cu..."), the stub
// jumps straight into glibc's dlsym with the program's own return address still on the stack, and
// glibc answers exactly as without the shim. (Sanitizer runtimes resolve all their interceptors
// this way before their own initialisation is done: no shim code runs on that path.) Driver names,
// and every other handle, go to lookup().
extern "C" __attribute__((visibility("hidden"))) void* gms_rtld_next_target(const char* name) {
  if (name && name[0] == 'c' && name[1] == 'u') return nullptr;
  return libc::real_dlsym_address();
}
extern "C" __attribute__((visibility("hidden"))) void* gms_dlsym_lookup(void* handle, const char* name, void* caller) {
  return lookup(handle, name, caller);
}

// Programs built against glibc >= 2.34 bind dlsym@GLIBC_2.34, older ones dlsym@GLIBC_2.2.5; both
// land here (libgpumemshim.map defines the two version nodes).
#if defined(__x86_64__)
__asm__(R"(
    .macro GMS_DLSYM_STUB name
    .text
    .p2align 4
    .globl \name
    .type \name, @function
\name:
    cmpq $-1, %rdi                  # RTLD_NEXT
    jne 2f
    pushq %rdi
    pushq %rsi
    subq $8, %rsp                   # 16-byte stack alignment for the call
    movq %rsi, %rdi
    call gms_rtld_next_target
    addq $8, %rsp
    popq %rsi
    popq %rdi
    testq %rax, %rax
    jz 2f
    jmp *%rax                       # glibc's dlsym, called as if by the program
2:
    movq (%rsp), %rdx               # the caller's return address
    jmp gms_dlsym_lookup
    .size \name, .-\name
    .endm
    GMS_DLSYM_STUB gms_dlsym_2_34
    GMS_DLSYM_STUB gms_dlsym_2_2_5
    .symver gms_dlsym_2_34, dlsym@@GLIBC_2.34
    .symver gms_dlsym_2_2_5, dlsym@GLIBC_2.2.5
)");
#else
// Elsewhere (not built or tested by the project yet): RTLD_NEXT goes through the emulation.
extern "C" __attribute__((visibility("default"), noinline)) void* dlsym(void* handle, const char* name) {
  return lookup(handle, name, __builtin_return_address(0));
}
#endif

GMS_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  CUresult r = call_real(GMS_REAL(cuGetProcAddress), symbol, pfn, version, flags);
  return routed_proc_address<void>(r, symbol, pfn);
}

GMS_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
  CUresult r = call_real(GMS_REAL(cuGetProcAddress_v2), symbol, pfn, version, flags, status);
  return routed_proc_address<void>(r, symbol, pfn);
}
