// (l) Recycled host blocks (GPUMEMSHIM_HOST_POOL) over the stand-in driver: a freed block comes
// back to the next allocation of about its size with its registration kept; calloc clears a
// recycled block; realloc, malloc_usable_size and the aligned forms behave as glibc's; the
// program's own registration of a pool block succeeds; the bound gives memory back (after the
// shim's registration of it is dropped); a fork child can read, free and allocate pool blocks;
// 16 threads allocate, copy and free at once. Every byte copied is checked.
//
// Arguments: --shim (preloaded), --pool (GPUMEMSHIM_HOST_POOL=128M and GPUMEMSHIM_REGISTER=always,
// so that registrations can be counted exactly), --sanitizer-malloc (a sanitizer owns malloc: no pool).
#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "common.h"

namespace {

constexpr size_t MiB = 1024 * 1024;
constexpr size_t B = 40 * MiB;

bool g_pool = false;  // the shim's pool serves large blocks, and every copy registers
bool g_sanitizer = false;  // a sanitizer's allocator owns malloc
CUdeviceptr g_dev = 0;

unsigned long regs() { return fake_cuda_calls("cuMemHostRegister_v2"); }
unsigned long unregs() { return fake_cuda_calls("cuMemHostUnregister"); }

void fill(void* p, size_t n, uint32_t seed) {
  auto* w = static_cast<uint32_t*>(p);
  for (size_t i = 0; i < n / 4; ++i) w[i] = seed * 2654435761u + static_cast<uint32_t>(i);
}
bool filled(const void* p, size_t n, uint32_t seed) {
  auto* w = static_cast<const uint32_t*>(p);
  for (size_t i = 0; i < n / 4; ++i) {
    if (w[i] != seed * 2654435761u + static_cast<uint32_t>(i)) return false;
  }
  return true;
}

// Host to device and back through h, every byte checked.
void round_trip(void* h, size_t n, uint32_t seed) {
  fill(h, n, seed);
  CK(cuMemcpyHtoD(g_dev, h, n));
  CHECK(std::memcmp(preload::dev_ptr<unsigned char>(g_dev), h, n) == 0);
  fill(preload::dev_ptr<unsigned char>(g_dev), n, seed + 1);
  CK(cuMemcpyDtoHAsync(h, g_dev, n, nullptr));
  CHECK(filled(h, n, seed + 1));
}

struct Mark {
  unsigned long r = regs(), u = unregs();
  void expect(unsigned long dr, unsigned long du, int line) const {
    if (!g_pool) return;
    if (regs() - r != dr || unregs() - u != du) {
      std::fprintf(stderr, "pool.cc:%d: registrations %lu (expected %lu), unregistrations %lu (expected %lu)\n", line,
                   regs() - r, dr, unregs() - u, du);
      std::exit(1);
    }
  }
};
#define EXPECT_REGS(dr, du) mark.expect(dr, du, __LINE__)

}  // namespace

int main(int argc, char** argv) {
  g_sanitizer = preload::has_arg(argc, argv, "--sanitizer-malloc");
  g_pool = preload::has_arg(argc, argv, "--shim") && preload::has_arg(argc, argv, "--pool") &&
           !preload::has_arg(argc, argv, "--sanitizer-malloc");
  preload::use_device0();
  CK(cuMemAlloc(&g_dev, 2 * B));

  {
    // 1. A freed block serves the next allocation of its size, registration and all.
    Mark mark;
    void* a = std::malloc(B);
    CHECK(a && malloc_usable_size(a) >= B);
    round_trip(a, B, 1);
    EXPECT_REGS(1, 0);
    std::free(a);
    EXPECT_REGS(1, 0);  // the registration stays with the pooled pages
    void* b = std::malloc(B - 12345);  // near sizes share a block
    if (g_pool) CHECK(b == a);
    round_trip(b, B - 12345, 3);
    EXPECT_REGS(1, 0);  // found registered: no new registration
    // 2. calloc of a recycled (dirty) block is all zeroes, up to its usable size.
    std::free(b);
    auto* z = static_cast<unsigned char*>(std::calloc(B / 8, 8));
    CHECK(z);
    size_t usable = malloc_usable_size(z);
    CHECK(usable >= B);
    for (size_t i = 0; i < usable; i += 1) {
      if (z[i] != 0) {
        std::fprintf(stderr, "pool.cc: calloc byte %zu is %u\n", i, z[i]);
        return 1;
      }
    }
    std::free(z);
  }

  {
    // 3. realloc: a pool block that grows moves to glibc (whose large blocks grow without a
    //    copy) with its contents; shrinking a little stays in place, shrinking a lot moves to a
    //    small block; realloc(p, 0) frees.
    auto* p = static_cast<unsigned char*>(std::malloc(B));
    fill(p, B, 5);
    auto* grown = static_cast<unsigned char*>(std::realloc(p, B + 3 * MiB));
    CHECK(grown && malloc_usable_size(grown) >= B + 3 * MiB && filled(grown, B, 5));
    grown = static_cast<unsigned char*>(std::realloc(grown, B + 9 * MiB));  // glibc's own realloc now
    CHECK(grown && filled(grown, B, 5));
    std::free(grown);
    auto* q = static_cast<unsigned char*>(std::malloc(B));
    fill(q, B, 6);
    auto* same = static_cast<unsigned char*>(std::realloc(q, B - 5 * MiB));
    CHECK(same && filled(same, B - 5 * MiB, 6));
    if (g_pool) CHECK(same == q);
    auto* small = static_cast<unsigned char*>(std::realloc(same, 2 * MiB));
    CHECK(small && filled(small, 2 * MiB, 6));
    errno = 0;
    void* none = std::realloc(small, 0);
    CHECK(none == nullptr);
  }

  {
    // 4. Aligned forms: up to a page from the pool, larger alignments from glibc; all are freed
    //    the ordinary way and copy correctly.
    void* a = nullptr;
    CHECK(posix_memalign(&a, 64, B) == 0 && a && reinterpret_cast<uintptr_t>(a) % 64 == 0);
    void* b = aligned_alloc(4096, B);
    CHECK(b && reinterpret_cast<uintptr_t>(b) % 4096 == 0);
    void* c = memalign(2 * MiB, B);
    CHECK(c && reinterpret_cast<uintptr_t>(c) % (2 * MiB) == 0);
    void* bad = nullptr;
    // glibc's answer, pool or not (a sanitizer's allocator reports it as an error instead)
    if (!g_sanitizer) CHECK(posix_memalign(&bad, 24, B) == EINVAL);
    for (void* p : {a, b, c}) {
      CHECK(malloc_usable_size(p) >= B);
      round_trip(p, B, 7);
      std::free(p);
    }
  }

  if (!g_sanitizer) {
    // 4b. A block the program made read-only before freeing it (a JIT's buffer) comes back as an
    //     ordinary malloc block: writable, and calloc clears it. (glibc frees such a block; a
    //     sanitizer's allocator writes into it at free.)
    void* ro = nullptr;
    CHECK(posix_memalign(&ro, 4096, 4 * MiB) == 0);
    fill(ro, 4 * MiB, 3);
    CHECK(mprotect(ro, 4 * MiB, PROT_READ) == 0);
    std::free(ro);
    auto* z = static_cast<unsigned char*>(std::calloc(1, 4 * MiB));
    CHECK(z);
    for (size_t i = 0; i < 4 * MiB; i += 4096) CHECK(z[i] == 0);
    std::memset(z, 7, 4 * MiB);
    std::free(z);
  }

  {
    // 5. The program registers a pool block the shim registered: the shim steps aside, the
    //    program's calls succeed, and the next owner of the block is registered by the shim anew.
    Mark mark;
    void* a = std::malloc(B);
    round_trip(a, B, 9);
    unsigned long r0 = regs() - mark.r, u0 = unregs() - mark.u;  // 1, 0 if the block was new to the pool
    CK(cuMemHostRegister(a, B, 0));
    CK(cuMemHostUnregister(a));
    std::free(a);
    void* b = std::malloc(B);
    round_trip(b, B, 11);
    // The program's register and unregister, the shim's drop; and a new registration of the shim
    // if b is a again (another cached block of the same size is still registered).
    EXPECT_REGS(r0 + 1 + (b == a ? 1 : 0), u0 + 1 + 1);
    std::free(b);
  }

  {
    // 6. A fork child reads a pool block the parent wrote, frees it, allocates and frees others.
    auto* a = static_cast<unsigned char*>(std::malloc(B));
    round_trip(a, B, 13);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      if (!filled(a, B, 14)) _exit(3);
      std::free(a);
      for (int i = 0; i < 4; ++i) {
        auto* c = static_cast<uint32_t*>(std::malloc(B));
        if (!c) _exit(4);
        fill(c, B, 20 + i);
        if (!filled(c, B, 20 + i)) _exit(5);
        std::free(c);
      }
      _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(filled(a, B, 14));  // the child's frees and writes are its own
    std::free(a);
  }

  {
    // 7. The bound (128M with --pool): three live 40 MiB blocks fit, a fourth comes from glibc;
    //    then 60 MiB needs two cached blocks given back, their registrations dropped first.
    Mark mark;
    void* blocks[4];
    for (int i = 0; i < 4; ++i) {
      blocks[i] = std::malloc(B);
      round_trip(blocks[i], B, 30 + i);
    }
    // Blocks 1-3 are the pool's (one or more known to it from steps 1-6, registered then); the
    // fourth is glibc's.
    for (void* p : blocks) std::free(p);
    unsigned long r = regs() - mark.r, u = unregs() - mark.u;
    void* big = std::malloc(60 * MiB);
    round_trip(big, 60 * MiB, 40);
    // glibc's block was unregistered at its free; two cached pool blocks at the big one's.
    EXPECT_REGS(r + 1, u + 2);
    std::free(big);
  }

  {
    // 8. 16 threads allocating, copying and freeing pool blocks of near sizes at once.
    preload::on_threads(16, [](int t, CUdeviceptr dev) {
      for (int i = 0; i < 8; ++i) {
        size_t n = 4 * MiB + static_cast<size_t>(t) * 4096;
        void* h = (i % 2) ? std::calloc(n, 1) : std::malloc(n);
        if (!h) return false;
        if (i % 2) {
          for (size_t k = 0; k < n; k += 4096) {
            if (static_cast<unsigned char*>(h)[k] != 0) return false;
          }
        }
        fill(h, n, static_cast<uint32_t>(t * 100 + i));
        if (cuMemcpyHtoD(dev, h, n) != CUDA_SUCCESS) return false;
        if (std::memcmp(preload::dev_ptr<unsigned char>(dev), h, n) != 0) return false;
        std::free(h);
      }
      return true;
    });
  }

  CK(cuMemFree(g_dev));
  std::printf("pool ok\n");
  return 0;
}
