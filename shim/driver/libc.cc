#include "libc.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/guard.h"

namespace gms::libc {
namespace {

// dlsym/dlerror need a little memory the first time; 64 KiB is far more than glibc asks for.
alignas(64) unsigned char g_pool[64 * 1024];
std::atomic<size_t> g_pool_used{0};

void* pool_alloc(size_t n, size_t align = 16) {
  size_t used = g_pool_used.load(std::memory_order_relaxed);
  for (;;) {
    size_t start = (used + align - 1) & ~(align - 1);
    if (start + n > sizeof(g_pool)) {
      static const char kMsg[] = "gpumemshim: bootstrap pool exhausted during dlsym\n";
      (void)!::write(2, kMsg, sizeof(kMsg) - 1);
      std::abort();
    }
    if (g_pool_used.compare_exchange_weak(used, start + n, std::memory_order_relaxed)) {
      return g_pool + start;
    }
  }
}

using dlsym_fn = void* (*)(void*, const char*);
using dlvsym_fn = void* (*)(void*, const char*, const char*);

dlsym_fn real_dlsym() {
  static std::atomic<dlsym_fn> fn{nullptr};
  dlsym_fn f = fn.load(std::memory_order_acquire);
  if (f) return f;
  ShimScope scope;
  void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  f = reinterpret_cast<dlsym_fn>(p);
  fn.store(f, std::memory_order_release);
  return f;
}

// One slot per real function, all resolved in one pass the first time any is needed. dlsym
// allocates and frees while it resolves, and those nested calls must find either a resolved
// function or the bootstrap answer (the pool, "not tracked"), never a slot half way through:
// the first large free() once resolved malloc_usable_size, dlsym freed its old error string, and
// the nested free() called through the empty slot. `t_resolving` marks the thread doing the pass.
thread_local bool t_resolving __attribute__((tls_model("initial-exec"))) = false;

#define GMS_LIBC_FUNCTIONS(X)                           \
  X(malloc, void*, (size_t))                            \
  X(free, void, (void*))                                \
  X(calloc, void*, (size_t, size_t))                    \
  X(realloc, void*, (void*, size_t))                    \
  X(reallocarray, void*, (void*, size_t, size_t))       \
  X(posix_memalign, int, (void**, size_t, size_t))      \
  X(aligned_alloc, void*, (size_t, size_t))             \
  X(memalign, void*, (size_t, size_t))                  \
  X(malloc_usable_size, size_t, (void*))                \
  X(mmap, void*, (void*, size_t, int, int, int, off_t)) \
  X(munmap, int, (void*, size_t))                       \
  X(mremap, void*, (void*, size_t, size_t, int, ...))   \
  X(madvise, int, (void*, size_t, int))                 \
  X(memcpy, void*, (void*, const void*, size_t))        \
  X(memmove, void*, (void*, const void*, size_t))

#define GMS_SLOT(name, ret, params) \
  using name##_fn = ret(*) params;  \
  std::atomic<name##_fn> g_##name{nullptr};
GMS_LIBC_FUNCTIONS(GMS_SLOT)
#undef GMS_SLOT

void resolve_all() {
  if (t_resolving) return;
  t_resolving = true;
  dlsym_fn d = real_dlsym();
#define GMS_RESOLVE(name, ret, params)                                                       \
  if (!g_##name.load(std::memory_order_acquire)) {                                           \
    auto f = reinterpret_cast<name##_fn>(d(RTLD_NEXT, #name));                               \
    if (!f) {                                                                                \
      static const char kMsg[] = "gpumemshim: cannot find the real " #name "; giving up\n"; \
      (void)!::write(2, kMsg, sizeof(kMsg) - 1);                                             \
      std::abort();                                                                          \
    }                                                                                        \
    g_##name.store(f, std::memory_order_release);                                            \
  }
  GMS_LIBC_FUNCTIONS(GMS_RESOLVE)
#undef GMS_RESOLVE
  t_resolving = false;
}

// nullptr only on the thread inside resolve_all().
#define GMS_ACCESSOR(name, ret, params)                     \
  inline name##_fn real_##name() {                          \
    name##_fn f = g_##name.load(std::memory_order_acquire); \
    if (__builtin_expect(f != nullptr, 1)) return f;        \
    resolve_all();                                          \
    return g_##name.load(std::memory_order_acquire);        \
  }
GMS_LIBC_FUNCTIONS(GMS_ACCESSOR)
#undef GMS_ACCESSOR

}  // namespace

bool from_bootstrap_pool(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  auto lo = reinterpret_cast<uintptr_t>(g_pool);
  return a >= lo && a < lo + sizeof(g_pool);
}

void* dlsym(void* handle, const char* name) { return real_dlsym()(handle, name); }
void* real_dlsym_address() { return reinterpret_cast<void*>(real_dlsym()); }

void* malloc(size_t n) {
  auto f = real_malloc();
  return f ? f(n) : pool_alloc(n);
}

void free(void* p) {
  if (from_bootstrap_pool(p)) return;
  auto f = real_free();
  if (f) f(p);
}

void* calloc(size_t n, size_t size) {
  auto f = real_calloc();
  if (f) return f(n, size);
  size_t total = 0;
  if (__builtin_mul_overflow(n, size, &total)) return nullptr;
  return pool_alloc(total);  // static storage: already zero
}

void* realloc(void* p, size_t n) {
  if (from_bootstrap_pool(p)) {
    // Moving out of the pool: the old size is unknown, but never larger than what is left of it.
    void* q = malloc(n);
    if (q) {
      size_t avail = sizeof(g_pool) - (static_cast<unsigned char*>(p) - g_pool);
      std::memcpy(q, p, n < avail ? n : avail);
    }
    return q;
  }
  auto f = real_realloc();
  // Empty only while resolving, when every block (so p, if any) comes from the pool: handled above.
  return f ? f(p, n) : pool_alloc(n);
}

void* reallocarray(void* p, size_t n, size_t size) { return real_reallocarray()(p, n, size); }
int posix_memalign(void** out, size_t align, size_t n) { return real_posix_memalign()(out, align, n); }
void* aligned_alloc(size_t align, size_t n) { return real_aligned_alloc()(align, n); }

void* memalign(size_t align, size_t n) {
  auto f = real_memalign();
  return f ? f(align, n) : pool_alloc(n, align < 16 ? 16 : align);
}

size_t malloc_usable_size(void* p) {
  if (!p || from_bootstrap_pool(p)) return 0;
  auto f = real_malloc_usable_size();
  return f ? f(p) : 0;  // while resolving: a block of dlsym's own, never a tracked one
}

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return real_mmap()(addr, len, prot, flags, fd, off);
}
int munmap(void* addr, size_t len) { return real_munmap()(addr, len); }
void* mremap(void* old, size_t old_len, size_t new_len, int flags, void* new_addr) {
  return real_mremap()(old, old_len, new_len, flags, new_addr);
}
int madvise(void* addr, size_t len, int advice) { return real_madvise()(addr, len, advice); }

// While dlsym resolves (it may copy), byte by byte; volatile, so the compiler cannot turn the
// loop back into a call of memcpy, which is the shim's own.
void* memmove(void* dst, const void* src, size_t n) {
  if (auto f = real_memmove()) return f(dst, src, n);
  auto* d = static_cast<volatile unsigned char*>(dst);
  auto* s = static_cast<const volatile unsigned char*>(src);
  if (d < s) {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    for (size_t i = n; i > 0; --i) d[i - 1] = s[i - 1];
  }
  return dst;
}
void* memcpy(void* dst, const void* src, size_t n) {
  if (auto f = real_memcpy()) return f(dst, src, n);
  return memmove(dst, src, n);
}

}  // namespace gms::libc
