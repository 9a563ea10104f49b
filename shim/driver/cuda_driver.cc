#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstring>

#include "core/guard.h"
#include "core/log.h"
#include "core/runtime.h"
#include "libc.h"

namespace gms::driver {

void* g_real[static_cast<int>(Fn::count)];
std::atomic<bool> g_loaded{false};

namespace {

struct Route {
  void* real;
  void* hook;
};

const char* const kNames[] = {
#define GMS_HOOK(sym, pfn, file) #sym,
#include "cuda_hooks.def"
#undef GMS_HOOK
    "",
#define GMS_USED(sym, pfn) #sym,
#include "cuda_used.def"
#undef GMS_USED
};

void* const kHooks[kHookCount] = {
#define GMS_HOOK(sym, pfn, file) reinterpret_cast<void*>(&::sym),
#include "cuda_hooks.def"
#undef GMS_HOOK
};

// Sorted by real pointer once the driver is loaded; read without a lock afterwards.
Route g_routes[kHookCount];
int g_route_count = 0;
void* g_handle = nullptr;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

void load_once() {
  ShimScope scope;
  // RTLD_NOLOAD first: the application (or the CUDA runtime) normally has it open already, and
  // then we must use that very copy. Without a GPU driver there is nothing to load.
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) h = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
  if (!h) (void)dlerror();  // our failed attempt is not the application's error to find
  g_handle = h;
  if (h) {
    for (int i = 0; i < static_cast<int>(Fn::count); ++i) {
      if (i == kHookCount) continue;
      g_real[i] = libc::dlsym(h, kNames[i]);
    }
    for (int i = 0; i < kHookCount; ++i) {
      if (g_real[i] && g_real[i] != kHooks[i]) g_routes[g_route_count++] = Route{g_real[i], kHooks[i]};
    }
    std::sort(g_routes, g_routes + g_route_count, [](const Route& a, const Route& b) { return a.real < b.real; });
    if (log_enabled(LogLevel::debug)) {
      Line l;
      l.str("driver loaded: ").u64(static_cast<uint64_t>(g_route_count)).str(" of ").u64(kHookCount).str(" hooked implementations present");
      log(LogLevel::debug, l);
    }
  } else if (log_enabled(LogLevel::info)) {
    Line l;
    l.str("libcuda.so.1 not found: CUDA calls pass through to nothing");
    log(LogLevel::info, l);
  }
  g_loaded.store(true, std::memory_order_release);
}

int hook_index(const void* p) {
  for (int i = 0; i < kHookCount; ++i) {
    if (kHooks[i] == p) return i;
  }
  return -1;
}

// A hooked implementation of this name: "cuMemAlloc_v2" itself, or the base name that
// cuGetProcAddress is asked for ("cuMemAlloc" -> cuMemAlloc_v2, "cuLaunchKernel" -> its _ptsz).
int name_index(const char* name) {
  size_t n = std::strlen(name);
  for (int i = 0; i < kHookCount; ++i) {
    if (std::strncmp(kNames[i], name, n) != 0) continue;
    const char* rest = kNames[i] + n;
    if (*rest == '\0' || std::strncmp(rest, "_v", 2) == 0 || std::strncmp(rest, "_pt", 3) == 0) return i;
  }
  return -1;
}

}  // namespace

bool load_slow() {
  pthread_once(&g_once, load_once);
  return g_handle != nullptr;
}

void* libcuda_handle() {
  ensure_loaded();
  return g_handle;
}

void* route(void* real_ptr) {
  if (!real_ptr || !ensure_loaded()) return real_ptr;
  auto it = std::lower_bound(g_routes, g_routes + g_route_count, real_ptr,
                             [](const Route& r, void* p) { return r.real < p; });
  if (it != g_routes + g_route_count && it->real == real_ptr) return it->hook;
  return real_ptr;
}

void* route_symbol(const char* name, void* found) {
  if (!found || !name || name[0] != 'c' || name[1] != 'u') return found;
  int own = hook_index(found);
  if (own >= 0) {
    // The lookup found our exported hook (RTLD_DEFAULT, or a handle whose scope holds us).
    return (ensure_loaded() && g_real[own]) ? found : nullptr;
  }
  void* routed = route(found);
  if (routed == found && name_index(name) >= 0) {
    // A hooked name whose pointer we cannot map: a libcuda that hands out something other than
    // its exported symbol. The call still works; it is just not seen. Count it loudly.
    runtime_stats().anomaly(Anomaly::unrouted_entry_points);
    Line l;
    l.str("dlsym(\"").str(name).str("\") returned a pointer the shim cannot route; calls through it are not observed");
    log(LogLevel::warn, l);
  }
  return routed;
}

}  // namespace gms::driver
