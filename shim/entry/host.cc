// Host memory hooks: the malloc family and the mmap family. Small blocks cost one compare on the
// way in and one malloc_usable_size on the way out; only blocks at or above GPUMEMSHIM_HOST_THRESHOLD
// reach the registry. glibc maps large malloc blocks with an internal mmap that the mmap hook never
// sees, which is why blocks are tracked here in the malloc family as well. With GPUMEMSHIM_HOST_POOL
// the large ones come from the shim's pool instead (act/host_pool): every hook that takes a
// pointer asks the pool first, since glibc must never see a pool block.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>

#include <cstring>

#include "act/copy.h"
#include "act/host_pool.h"
#include "common.h"
#include "driver/libc.h"

namespace gms::entry {
namespace {

inline bool large(size_t n) { return __builtin_expect(n >= host_threshold(), 0); }

// Only frees of memory whose usable size reaches the threshold can be tracked blocks.
inline bool maybe_tracked(void* p) {
  return p && !in_shim() && runtime_stats().live(MemKind::host_block) != 0 && large(libc::malloc_usable_size(p));
}

inline void track(void* p, size_t n, Origin o) {
  if (p && large(n) && !in_shim()) observe::host_block_alloc(addr(p), n, o);
}

// A large block from the pool, or nullptr (the pool is off, full, or the alignment too large). The
// pool starts with the first large block after the CUDA driver is loaded.
inline void* pooled(size_t n, size_t align, Origin o, bool zero) {
  if (in_shim() || (!act::pool::on() && !act::pool::start())) return nullptr;
  return act::pool::take(n, align, o, zero);
}

inline uintptr_t page_round(uintptr_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) & ~(page - 1);
}

}  // namespace
}  // namespace gms::entry

using namespace gms;
using namespace gms::entry;

GMS_EXPORT void* malloc(size_t n) {
  if (!large(n)) return libc::malloc(n);
  if (void* p = pooled(n, 1, Origin::malloc, false)) return p;
  void* p = libc::malloc(n);
  track(p, n, Origin::malloc);
  return p;
}

// A tracked block is about to go away: the shim's registration of it goes first (while the memory
// is still the block's), then the block leaves the registry (before another thread can get the
// same address), then the memory. Returns the block's size, 0 if it was not tracked.
size_t forget_block(void* p) {
  auto r = host_blocks().find(addr(p));
  if (!r || r->base != addr(p)) return 0;
  act::host_range_going(r->base, r->end());
  auto gone = observe::host_block_free(addr(p));
  return gone ? gone->size : 0;
}

GMS_EXPORT void free(void* p) {
  if (act::pool::owns(p)) return act::pool::give(p);
  if (maybe_tracked(p)) forget_block(p);
  libc::free(p);
}

GMS_EXPORT void* calloc(size_t n, size_t size) {
  size_t total = 0;
  if (!__builtin_mul_overflow(n, size, &total) && large(total)) {
    if (void* p = pooled(total, 1, Origin::calloc, true)) return p;
  }
  void* p = libc::calloc(n, size);
  total = 0;
  if (p && !__builtin_mul_overflow(n, size, &total)) track(p, total, Origin::calloc);
  return p;
}

// A pool block shrinks as glibc's would: in place while it is not mostly wasted, else into a
// smaller block; realloc(p, 0) frees. A block that grows leaves the pool for glibc's, whose large
// blocks grow with mremap and no copy: a buffer grown step by step (a file read into a bytearray)
// is copied once, not at every step. Pool blocks are for buffers made at their size.
void* realloc_pooled(void* p, size_t n) {
  size_t have = act::pool::usable(p);
  if (n == 0) {
    act::pool::give(p);
    return nullptr;
  }
  if (have == 0) return nullptr;  // not a live block: nothing to grow (the pool logs frees of these)
  if (n <= have && n > have / 2) return p;
  void* q = nullptr;
  if (n > have) {
    q = libc::malloc(n);
    track(q, n, Origin::realloc);
  } else {
    q = malloc(n);
  }
  if (!q) return nullptr;  // the old block lives on, as glibc leaves it
  std::memcpy(q, p, n < have ? n : have);
  act::pool::give(p);
  return q;
}

GMS_EXPORT void* realloc(void* p, size_t n) {
  if (act::pool::owns(p)) return realloc_pooled(p, n);
  size_t forgot = maybe_tracked(p) ? forget_block(p) : 0;
  void* q = libc::realloc(p, n);
  if (!q && n != 0 && forgot) {
    observe::host_block_alloc(addr(p), forgot, Origin::realloc);  // failed: the old block lives on
  } else {
    track(q, n, Origin::realloc);
  }
  return q;
}

GMS_EXPORT void* reallocarray(void* p, size_t n, size_t size) {
  size_t total = 0;
  if (__builtin_mul_overflow(n, size, &total)) return libc::reallocarray(p, n, size);  // sets ENOMEM
  return realloc(p, total);
}

GMS_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  // Only valid alignments (powers of two, multiples of a pointer) may be served: glibc checks them.
  if (large(n) && align != 0 && align % sizeof(void*) == 0 && (align & (align - 1)) == 0) {
    if (void* p = pooled(n, align, Origin::memalign, false)) return *out = p, 0;
  }
  int r = libc::posix_memalign(out, align, n);
  if (r == 0) track(*out, n, Origin::memalign);
  return r;
}

GMS_EXPORT void* aligned_alloc(size_t align, size_t n) {
  if (large(n) && align != 0 && (align & (align - 1)) == 0) {
    if (void* p = pooled(n, align, Origin::memalign, false)) return p;
  }
  void* p = libc::aligned_alloc(align, n);
  track(p, n, Origin::memalign);
  return p;
}

GMS_EXPORT void* memalign(size_t align, size_t n) {
  if (large(n) && align != 0 && (align & (align - 1)) == 0) {
    if (void* p = pooled(n, align, Origin::memalign, false)) return p;
  }
  void* p = libc::memalign(align, n);
  track(p, n, Origin::memalign);
  return p;
}

// Large copies to or from CUDA pinned memory go to the copy crew (act/copy.h: copy_by_crew).
GMS_EXPORT void* memcpy(void* dst, const void* src, size_t n) {
  if (__builtin_expect(n >= act::kCrewCopyMin, 0) && act::copy_by_crew(dst, src, n)) return dst;
  return libc::memcpy(dst, src, n);
}
GMS_EXPORT void* memmove(void* dst, const void* src, size_t n) {
  if (__builtin_expect(n >= act::kCrewCopyMin, 0) && act::copy_by_crew(dst, src, n)) return dst;
  return libc::memmove(dst, src, n);
}

GMS_EXPORT size_t malloc_usable_size(void* p) {
  if (act::pool::owns(p)) return act::pool::usable(p);
  return libc::malloc_usable_size(p);
}

namespace gms::entry {
namespace {
void* mmap_impl(void* a, size_t len, int prot, int flags, int fd, off_t off) {
  bool watch = !in_shim();
  // MAP_FIXED silently replaces whatever was mapped there: that memory is gone first.
  if (watch && (flags & MAP_FIXED) && a) {
    act::host_range_going(addr(a), addr(a) + page_round(len));
    observe::host_range_gone(addr(a), addr(a) + page_round(len));
  }
  void* p = libc::mmap(a, len, prot, flags, fd, off);
  // PROT_NONE mappings are address-space reservations (the CUDA driver makes many GiB of them at
  // cuInit), not memory a program can copy from: not host blocks.
  if (watch && p != MAP_FAILED && large(len) && prot != PROT_NONE) {
    bool file = fd >= 0 && !(flags & MAP_ANONYMOUS);
    observe::host_block_alloc(addr(p), page_round(len), file ? Origin::mmap_file : Origin::mmap_anon,
                              static_cast<uint32_t>(prot));
  }
  return p;
}
}  // namespace
}  // namespace gms::entry

GMS_EXPORT void* mmap(void* a, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap_impl(a, len, prot, flags, fd, off);
}
GMS_EXPORT void* mmap64(void* a, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap_impl(a, len, prot, flags, fd, off);
}

GMS_EXPORT int munmap(void* a, size_t len) {
  if (!in_shim()) {
    act::host_range_going(addr(a), addr(a) + page_round(len));
    observe::host_range_gone(addr(a), addr(a) + page_round(len));
  }
  return libc::munmap(a, len);
}

GMS_EXPORT void* mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
  void* new_addr = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  bool watch = !in_shim();
  size_t forgot = 0;
  if (watch) {
    ShimScope scope;
    forgot = host_blocks().find(addr(old)) ? page_round(old_len) : 0;
    act::host_range_going(addr(old), addr(old) + page_round(old_len));
    observe::host_range_gone(addr(old), addr(old) + page_round(old_len));
  }
  void* p = libc::mremap(old, old_len, new_len, flags, new_addr);
  if (watch) {
    if (p != MAP_FAILED && (forgot || large(new_len))) {
      observe::host_block_alloc(addr(p), page_round(new_len), Origin::mremap);
    } else if (p == MAP_FAILED && forgot) {
      observe::host_block_alloc(addr(old), forgot, Origin::mremap);  // failed: the old mapping lives on
    }
  }
  return p;
}

// MADV_DONTNEED/FREE/REMOVE discard the contents without unmapping: pinned pages would no longer be
// the program's, so the shim's registrations there are dropped first.
GMS_EXPORT int madvise(void* a, size_t len, int advice) {
  if (!in_shim() && (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE)) {
    act::host_range_going(addr(a), addr(a) + page_round(len));
  }
  return libc::madvise(a, len, advice);
}

// The libstdc++ linked into the shim (shim/CMakeLists.txt: -static-libstdc++, --wrap) allocates
// through these: its memory is the shim's own, never a block of the program (its start-up pool of
// 71 KiB was counted as the program's under a low GPUMEMSHIM_HOST_THRESHOLD).
extern "C" {
void* __wrap_malloc(size_t n) {
  ShimScope scope;
  return malloc(n);
}
void __wrap_free(void* p) {
  ShimScope scope;
  free(p);
}
void* __wrap_calloc(size_t n, size_t size) {
  ShimScope scope;
  return calloc(n, size);
}
void* __wrap_realloc(void* p, size_t n) {
  ShimScope scope;
  return realloc(p, n);
}
void* __wrap_aligned_alloc(size_t align, size_t n) {
  ShimScope scope;
  return aligned_alloc(align, n);
}
int __wrap_posix_memalign(void** out, size_t align, size_t n) {
  ShimScope scope;
  return posix_memalign(out, align, n);
}
}
