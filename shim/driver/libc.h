#pragma once
#include <sys/types.h>

#include <cstddef>

// The real libc (or whichever allocator is next in the lookup order) behind the shim's hooks,
// resolved once through dlsym(RTLD_NEXT). dlsym itself may allocate while it resolves: those
// allocations are served from a small static pool, and free() recognises and ignores them.
namespace gms::libc {

void* malloc(size_t n);
void free(void* p);
void* calloc(size_t n, size_t size);
void* realloc(void* p, size_t n);
void* reallocarray(void* p, size_t n, size_t size);
int posix_memalign(void** out, size_t align, size_t n);
void* aligned_alloc(size_t align, size_t n);
void* memalign(size_t align, size_t n);
size_t malloc_usable_size(void* p);
void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off);
int munmap(void* addr, size_t len);
void* mremap(void* old, size_t old_len, size_t new_len, int flags, void* new_addr);
int madvise(void* addr, size_t len, int advice);
void* memcpy(void* dst, const void* src, size_t n);
void* memmove(void* dst, const void* src, size_t n);

// The real dlsym (GLIBC_2.34, else GLIBC_2.2.5), never our override.
void* dlsym(void* handle, const char* name);
void* real_dlsym_address();

bool from_bootstrap_pool(const void* p);

}  // namespace gms::libc
