// (h) Host memory hooks. First, allocations made from inside dlsym/dlopen (glibc allocates its error
// state there, which reaches the shim's malloc while the shim itself is inside dlsym). Then a fixed
// sequence of malloc-family and mmap-family calls whose tracked blocks the runner knows exactly, for
// any GPUMEMSHIM_HOST_THRESHOLD (it replays the same sequence in HostModel). One CUDA call
// (cuMemGetInfo) makes the process write its statistics. One 2 MiB block is left live at exit.
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

unsigned char* touch(void* p, size_t n, unsigned char v) {
  CHECK(p);
  auto* c = static_cast<unsigned char*>(p);
  c[0] = v;
  c[n / 2] = v;
  c[n - 1] = v;
  return c;
}
void* volatile g_kept;  // reachable at exit: not a leak for LeakSanitizer
void expect(const void* p, size_t n, unsigned char v) {
  auto* c = static_cast<const unsigned char*>(p);
  CHECK(c[0] == v && c[n / 2] == v && c[n - 1] == v);
}

}  // namespace

int main() {
  // Allocation from inside the dynamic linker: error strings for failed lookups.
  CHECK(dlsym(RTLD_DEFAULT, "gpumemshim_no_such_symbol") == nullptr);
  CHECK(dlerror() != nullptr);
  CHECK(dlopen("libgpumemshim-no-such-library.so", RTLD_NOW) == nullptr);
  CHECK(dlerror() != nullptr);
  void* self = dlopen(nullptr, RTLD_NOW);
  CHECK(self);
  CHECK(dlsym(self, "another_missing_symbol") == nullptr);
  CHECK(dlerror() != nullptr);

  preload::use_device0();
  size_t free_b = 0, total = 0;
  CK(cuMemGetInfo(&free_b, &total));

  // 1. malloc / free
  void* m1 = touch(std::malloc(2 * MiB), 2 * MiB, 1);
  std::free(m1);
  // 2. calloc: zeroed
  auto* c1 = static_cast<unsigned char*>(std::calloc(1, 3 * MiB));
  CHECK(c1 && c1[0] == 0 && c1[3 * MiB - 1] == 0);
  std::free(c1);
  // 3. realloc: grow from a small block, grow again, shrink below the threshold
  void* r = touch(std::malloc(512 * KiB), 512 * KiB, 2);
  r = std::realloc(r, 4 * MiB);
  CHECK(r && static_cast<unsigned char*>(r)[0] == 2);
  touch(r, 4 * MiB, 3);
  r = std::realloc(r, 8 * MiB);
  CHECK(r);
  expect(r, 4 * MiB, 3);
  r = std::realloc(r, 256 * KiB);
  CHECK(r && static_cast<unsigned char*>(r)[0] == 3);
  std::free(r);
  // 4. aligned forms
  void* a1 = nullptr;
  CHECK(posix_memalign(&a1, 4096, 2 * MiB) == 0);
  touch(a1, 2 * MiB, 4);
  void* a2 = touch(aligned_alloc(4096, 2 * MiB), 2 * MiB, 5);
  void* a3 = touch(memalign(4096, 2 * MiB), 2 * MiB, 6);
  CHECK(reinterpret_cast<uintptr_t>(a1) % 4096 == 0 && reinterpret_cast<uintptr_t>(a2) % 4096 == 0 &&
        reinterpret_cast<uintptr_t>(a3) % 4096 == 0);
  std::free(a1);
  std::free(a2);
  std::free(a3);
  // 5. exactly at the default threshold, and one byte below it
  std::free(touch(std::malloc(1 * MiB), 1 * MiB, 7));
  std::free(touch(std::malloc(1 * MiB - 1), 1 * MiB - 1, 8));
  // 6. reallocarray
  void* ra = touch(reallocarray(nullptr, 2, 1 * MiB), 2 * MiB, 9);
  std::free(ra);
  // 7. anonymous mmap, a hole punched in the middle, then the rest
  auto* mm = static_cast<unsigned char*>(mmap(nullptr, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  CHECK(mm != MAP_FAILED);
  touch(mm, 8 * MiB, 10);
  CHECK(munmap(mm + 3 * MiB, 2 * MiB) == 0);
  CHECK(mm[0] == 10 && mm[8 * MiB - 1] == 10);
  CHECK(munmap(mm, 8 * MiB) == 0);
  // 8. mremap: a tracked mapping grows (and may move)
  void* g = mmap(nullptr, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(g != MAP_FAILED);
  touch(g, 4 * MiB, 11);
  void* g2 = mremap(g, 4 * MiB, 8 * MiB, MREMAP_MAYMOVE);
  CHECK(g2 != MAP_FAILED);
  expect(g2, 4 * MiB, 11);
  CHECK(munmap(g2, 8 * MiB) == 0);
  // 9. mremap: a small mapping grows past the threshold
  void* s = mmap(nullptr, 64 * KiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(s != MAP_FAILED);
  touch(s, 64 * KiB, 12);
  void* s2 = mremap(s, 64 * KiB, 2 * MiB, MREMAP_MAYMOVE);
  CHECK(s2 != MAP_FAILED);
  expect(s2, 64 * KiB, 12);
  CHECK(munmap(s2, 2 * MiB) == 0);
  // 10. a file mapping
  int fd = memfd_create("gpumemshim-preload", 0);
  CHECK(fd >= 0);
  CHECK(ftruncate(fd, 2 * MiB) == 0);
  void* f = mmap(nullptr, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(f != MAP_FAILED);
  touch(f, 2 * MiB, 13);
  CHECK(munmap(f, 2 * MiB) == 0);
  close(fd);
  // 11. MAP_FIXED over part of a tracked mapping replaces that part
  auto* fx = static_cast<unsigned char*>(mmap(nullptr, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  CHECK(fx != MAP_FAILED);
  void* over = mmap(fx + 2 * MiB, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  CHECK(over == fx + 2 * MiB);
  CHECK(munmap(fx, 4 * MiB) == 0);
  // 12. one block left live at exit
  g_kept = touch(std::malloc(2 * MiB), 2 * MiB, 14);
  expect(g_kept, 2 * MiB, 14);

  std::printf("host: ok\n");
  return 0;
}
