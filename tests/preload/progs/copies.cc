// (k) Fast copies from pageable memory over the stand-in driver: whole host blocks registered by
// the shim, the registration cache, every path that must drop a registration before the memory
// goes away (free, realloc, munmap, mremap, madvise, MAP_FIXED), a new block at a freed block's
// address, the program's own registration of a block the shim had registered, staged copies, and
// 16 threads copying and freeing at once. Every copy's data is checked in both directions.
// The stand-in counts the calls that reached cuMemHostRegister_v2 / cuMemHostUnregister, so the
// program checks the shim's registrations itself; the runner checks the shim's statistics.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "common.h"

namespace {

constexpr size_t MiB = 1024 * 1024;
constexpr size_t N = 64 * MiB;  // large enough that registering pays off on the first copy

bool g_shim = false, g_register = true, g_malloc_hooked = true;
CUdeviceptr g_dev = 0;

unsigned long regs() { return fake_cuda_calls("cuMemHostRegister_v2"); }
unsigned long unregs() { return fake_cuda_calls("cuMemHostUnregister"); }

void fill(void* p, size_t n, uint32_t seed) {
  auto* c = static_cast<unsigned char*>(p);  // may be unaligned (the slice of step 9)
  for (size_t i = 0; i + 4 <= n; i += 4) {
    uint32_t w = seed * 2654435761u + static_cast<uint32_t>(i);
    std::memcpy(c + i, &w, 4);
  }
}
bool same(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }
unsigned char* device_bytes() { return preload::dev_ptr<unsigned char>(g_dev); }

// Host to device and back through `h`, every byte checked; both sync and async forms.
void round_trip(void* h, size_t n, uint32_t seed) {
  fill(h, n, seed);
  CK(cuMemcpyHtoD(g_dev, h, n));
  CHECK(same(device_bytes(), h, n));
  fill(device_bytes(), n, seed + 1);
  CK(cuMemcpyDtoHAsync(h, g_dev, n, nullptr));  // returns with the data in place (pageable contract)
  CHECK(same(device_bytes(), h, n));
}

// Expected change of the stand-in's registration counters since a mark.
struct Mark {
  unsigned long r = regs(), u = unregs();
  // dr/du: the shim's own calls; own_r/own_u: the program's, which happen with or without it.
  void expect(unsigned long dr, unsigned long du, int line, unsigned long own_r = 0, unsigned long own_u = 0) const {
    if (g_shim && !g_register) return;  // the cost model's choice: not counted here
    unsigned long want_r = (g_shim ? dr : 0) + own_r, want_u = (g_shim ? du : 0) + own_u;
    if (regs() - r != want_r || unregs() - u != want_u) {
      std::fprintf(stderr, "copies.cc:%d: registrations %lu (expected %lu), unregistrations %lu (expected %lu)\n",
                   line, regs() - r, want_r, unregs() - u, want_u);
      std::exit(1);
    }
  }
};
#define EXPECT_REGS(dr, du, ...) mark.expect(dr, du, __LINE__, ##__VA_ARGS__)

void* map(size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED);
  return p;
}

// Whether the shim runs and does what the option `name` turns off ("off": it does not).
bool shim_does(const char* name) {
  const char* v = std::getenv(name);
  return g_shim && !(v && std::strcmp(v, "off") == 0);
}

// The end of every part: the device buffer freed, and the line the runner waits for.
int passed() {
  CK(cuMemFree(g_dev));
  std::printf("copies ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  g_shim = preload::has_arg(argc, argv, "--shim");
  g_malloc_hooked = !preload::has_arg(argc, argv, "--sanitizer-malloc");
  // The exact registration counts hold when every copy of a known block registers it
  // (GPUMEMSHIM_REGISTER=always); in the other modes the cost model decides (its own unit tests
  // cover that) and only the data is checked here.
  const char* mode = std::getenv("GPUMEMSHIM_REGISTER");
  g_register = mode && std::strcmp(mode, "always") == 0;
  preload::use_device0();
  CK(cuMemAlloc(&g_dev, 2 * N));

  if (preload::has_arg(argc, argv, "--spilled")) {
    // Run with GPUMEMSHIM_POLICY=spill and a 1 MiB device limit: 8 MiB allocations are placed on
    // the host (managed, or mapped pinned with GPUMEMSHIM_SPILL=pinned). Copies between them and
    // pageable memory, sync, async on a stream, and through cuMemcpy, keep every byte.
    constexpr size_t S = 8 * MiB;
    CUdeviceptr sp = 0;
    CK(cuMemAlloc(&sp, S));
    CUstream st;
    CK(cuStreamCreate(&st, 0));
    std::vector<unsigned char> a(S), b(S);
    fill(a.data(), S, 51);
    CK(cuMemcpyHtoD(sp, a.data(), S));
    CK(cuMemcpyDtoH(b.data(), sp, S));
    CHECK(same(a.data(), b.data(), S));
    fill(a.data(), S, 53);
    CK(cuMemcpyHtoDAsync(sp, a.data(), S, st));
    std::memset(b.data(), 0, S);
    CK(cuMemcpyDtoHAsync(b.data(), sp, S, st));
    CK(cuStreamSynchronize(st));
    CHECK(same(a.data(), b.data(), S));
    fill(a.data(), S, 55);
    CK(cuMemcpy(sp, reinterpret_cast<CUdeviceptr>(a.data()), S));
    std::memset(b.data(), 0, S);
    CK(cuMemcpy(reinterpret_cast<CUdeviceptr>(b.data()), sp, S));
    CHECK(same(a.data(), b.data(), S));
    // A slice in the middle of the spilled buffer.
    fill(a.data(), S, 57);
    CK(cuMemcpyHtoD(sp + 4096, a.data(), S - 8192));
    CK(cuMemcpyDtoH(b.data(), sp + 4096, S - 8192));
    CHECK(same(a.data(), b.data(), S - 8192));
    CK(cuStreamDestroy(st));
    CK(cuMemFree(sp));
    // 64 MiB spilled as pinned memory are made the shim's way (pages touched by its copy threads,
    // then registered), not by cuMemHostAlloc, and cuMemFree gives them back the same way.
    const char* to = std::getenv("GPUMEMSHIM_SPILL");
    bool pinned = to && std::strcmp(to, "pinned") == 0;
    unsigned long allocs = fake_cuda_calls("cuMemHostAlloc"), r0 = regs(), u0 = unregs();
    constexpr size_t L = 64 * MiB;
    std::vector<unsigned char> big(L), back(L);
    fill(big.data(), L, 59);
    CK(cuMemAlloc(&sp, L));
    CK(cuMemcpyHtoD(sp, big.data(), L));
    CK(cuMemcpyDtoH(back.data(), sp, L));
    CHECK(same(big.data(), back.data(), L));
    CK(cuMemFree(sp));
    bool shim_made = pinned && shim_does("GPUMEMSHIM_STAGE");
    CHECK(fake_cuda_calls("cuMemHostAlloc") - allocs == (pinned && !shim_made ? 1u : 0u));
    CHECK(regs() - r0 == (shim_made ? 1u : 0u) && unregs() - u0 == (shim_made ? 1u : 0u));
    return passed();
  }

  if (preload::has_arg(argc, argv, "--host-alloc")) {
    // Large pinned allocations, which the shim makes itself (pages touched by its copy threads,
    // then registered): usable as the driver's, mapped, refused to cuMemHostUnregister, freed
    // with cuMemFreeHost; write-combined ones are the driver's.
    unsigned long r0 = regs(), u0 = unregs();
    void* p = nullptr;
    constexpr size_t A = 64 * MiB + 5;
    CK(cuMemHostAlloc(&p, A, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    auto* h = static_cast<unsigned char*>(p);
    fill(h, A, 150);
    CUdeviceptr mapped = 0;
    CK(cuMemHostGetDevicePointer(&mapped, p, 0));
    CHECK(mapped == reinterpret_cast<CUdeviceptr>(p));
    CK(cuMemcpyHtoD(g_dev, h, 2 * N < A ? 2 * N : A));
    CHECK(same(device_bytes(), h, 2 * N < A ? 2 * N : A));
    CHECK(cuMemHostUnregister(p) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);  // allocated, not registered
    void* q = nullptr;
    CK(cuMemAllocHost(&q, 64 * MiB));
    std::memset(q, 7, 64 * MiB);
    void* wc = nullptr;
    CK(cuMemHostAlloc(&wc, 64 * MiB, CU_MEMHOSTALLOC_WRITECOMBINED));
    CK(cuMemFreeHost(wc));
    CK(cuMemFreeHost(q));
    CK(cuMemFreeHost(p));
    bool shim_made = shim_does("GPUMEMSHIM_STAGE");
    // Unregistrations: the shim's two frees, or the program's refused call reaching the driver.
    CHECK(regs() - r0 == (shim_made ? 2u : 0u) && unregs() - u0 == (shim_made ? 2u : 1u));
    return passed();
  }

  if (preload::has_arg(argc, argv, "--pinned-memcpy")) {
    // Large memcpy/memmove to and from CUDA pinned memory (the shim splits them across its copy
    // threads), overlapping memmove within it, and a fork child copying into it: every byte.
    constexpr size_t P = 40 * MiB + 123;
    void* pinned = nullptr;
    CK(cuMemHostAlloc(&pinned, P, 0));
    auto* pin = static_cast<unsigned char*>(pinned);
    auto* a = static_cast<unsigned char*>(map(P));
    auto* b = static_cast<unsigned char*>(map(P));
    fill(a, P, 140);
    std::memcpy(pin, a, P);
    CHECK(same(pin, a, P));
    std::memmove(b, pin, P);
    CHECK(same(b, a, P));
    std::memmove(pin + 4096, pin, P - 4096);  // overlapping: as libc's
    CHECK(same(pin + 4096, a, P - 4096));
    fill(a, P, 141);
    pid_t child = fork();
    if (child == 0) {
      std::memcpy(pin, a, P);  // the parent's copy threads are not here
      _exit(same(pin, a, P) ? 0 : 1);
    }
    int status = 0;
    CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CK(cuMemFreeHost(pinned));
    CHECK(munmap(a, P) == 0 && munmap(b, P) == 0);
    return passed();
  }

  if (preload::has_arg(argc, argv, "--racing-registration")) {
    // Thread A's async download into a 2 MiB mapping goes the driver's way (a first copy, below
    // the staging minimum); between the shim's decision and the driver's look at the memory,
    // thread B's copies of the same mapping make the shim register it. The driver then takes A's
    // copy as a pinned one and runs it later (the stand-in holds it back): A's call must still
    // return with the data in place, as it would from pageable memory.
    fake_cuda_set_defer(1);
    constexpr size_t B = 2 * MiB;
    struct Race {
      unsigned char* h;
      unsigned long regs_before;
      bool registered = false;
    };
    static Race race;
    race.h = static_cast<unsigned char*>(map(B));
    race.regs_before = regs();
    std::memset(race.h, 0, B);
    fill(device_bytes(), B, 130);
    CUstream st;
    CK(cuStreamCreate(&st, 0));
    fake_cuda_before_next_async_copy(
        [](void*) {
          std::thread b([] {
            CUdevice d;
            CUcontext c;
            CUdeviceptr other;
            if (cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) || cuMemAlloc(&other, B)) return;
            for (int i = 0; i < 4; ++i) (void)cuMemcpyHtoD(other, race.h, B);  // copied again and again: registered
            race.registered = regs() > race.regs_before;
            (void)cuMemFree(other);
          });
          b.join();
        },
        nullptr);
    CK(cuMemcpyDtoHAsync(race.h, g_dev, B, st));
    CHECK(same(race.h, device_bytes(), B));  // read at once, no synchronisation
    if (shim_does("GPUMEMSHIM_REGISTER")) CHECK(race.registered);  // the race was run
    CK(cuStreamSynchronize(st));
    CHECK(munmap(race.h, B) == 0);
    fake_cuda_set_defer(0);
    CK(cuStreamDestroy(st));
    return passed();
  }

  if (preload::has_arg(argc, argv, "--async-contract")) {
    // The stand-in holds back async copies from and into pinned memory until a synchronisation, as
    // a copy engine would. A pageable async upload must have consumed its source when it returns,
    // and a pageable async download must have its data in place: the program reuses and reads its
    // buffer at once. A 40 MB mapping (not a whole number of pages; mmap, which the shim tracks
    // under the sanitizers too), copied again and again so that the shim registers it; both
    // directions.
    fake_cuda_set_defer(1);
    constexpr size_t B = 40000000;
    CUstream st;
    CK(cuStreamCreate(&st, 0));
    auto* h = static_cast<unsigned char*>(map(B));
    std::vector<unsigned char> want(B);
    for (uint32_t i = 0; i < 4; ++i) {
      fill(h, B, 70 + i);
      std::memcpy(want.data(), h, B);
      CK(cuMemcpyHtoDAsync(g_dev, h, B, st));
      fill(h, B, 90 + i);  // the program's next batch, written at once
      CK(cuStreamSynchronize(st));
      CHECK(same(device_bytes(), want.data(), B));
    }
    for (uint32_t i = 0; i < 4; ++i) {
      fill(device_bytes(), B, 110 + i);
      CK(cuMemcpyDtoHAsync(h, g_dev, B, st));
      CHECK(same(h, device_bytes(), B));  // read at once, no synchronisation
    }
    CHECK(munmap(h, B) == 0);  // the shim's registration goes first; no held copy may still use it
    if (shim_does("GPUMEMSHIM_REGISTER")) CHECK(regs() > 0);  // the registered path was taken
    fake_cuda_set_defer(0);
    CK(cuStreamDestroy(st));
    return passed();
  }

  if (preload::has_arg(argc, argv, "--lru")) {
    // Run with GPUMEMSHIM_REGISTER_LIMIT=100M: three 40 MiB blocks, two fit.
    constexpr size_t B = 40 * MiB;
    void* a = map(B);
    void* b = map(B);
    void* c = map(B);
    Mark mark;
    round_trip(a, B, 31);
    round_trip(b, B, 33);
    round_trip(a, B, 35);  // a is now the most recently used
    EXPECT_REGS(2, 0);
    round_trip(c, B, 37);  // needs room: b goes
    EXPECT_REGS(3, 1);
    round_trip(b, B, 39);  // copied before, so registered again: a goes (c is newer)
    EXPECT_REGS(4, 2);
    round_trip(c, B, 41);  // still registered: a cache hit
    EXPECT_REGS(4, 2);
    for (void* m : {a, b, c}) CHECK(munmap(m, B) == 0);
    EXPECT_REGS(4, 4);
    return passed();
  }

  if (g_malloc_hooked) {
    Mark mark;
    // 1. A malloc'd block: registered at the first copy, found in the cache after.
    void* h = std::malloc(N);
    round_trip(h, N, 1);
    round_trip(h, N, 3);
    EXPECT_REGS(1, 0);
    // 2. free drops the registration first; a new block (often at the same address) is another
    //    block and is registered anew, never taken for the old one.
    std::free(h);
    EXPECT_REGS(1, 1);
    void* h2 = std::malloc(N);
    round_trip(h2, N, 5);
    EXPECT_REGS(2, 1);
    // 3. realloc: the block may move or change; the registration goes first.
    h2 = std::realloc(h2, N + 8 * MiB);
    CHECK(h2);
    EXPECT_REGS(2, 2);
    round_trip(h2, N, 7);
    std::free(h2);
  }

  {
    Mark mark;
    // 4. An anonymous mapping, then munmap.
    void* m = map(N);
    round_trip(m, N, 11);
    EXPECT_REGS(1, 0);
    CHECK(munmap(m, N) == 0);
    EXPECT_REGS(1, 1);
    // 5. madvise(MADV_DONTNEED) discards the pages: unregistered first, registered again on reuse.
    m = map(N);
    round_trip(m, N, 13);
    CHECK(madvise(m, N, MADV_DONTNEED) == 0);
    EXPECT_REGS(2, 2);
    round_trip(m, N, 15);
    EXPECT_REGS(3, 2);
    // 6. mremap moves it.
    void* m2 = mremap(m, N, 2 * N, MREMAP_MAYMOVE);
    CHECK(m2 != MAP_FAILED);
    EXPECT_REGS(3, 3);
    CHECK(munmap(m2, 2 * N) == 0);
    // 7. mmap(MAP_FIXED) over a registered mapping replaces its pages.
    m = map(N);
    round_trip(m, N, 17);
    void* fixed = mmap(m, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(fixed == m);
    EXPECT_REGS(4, 4);
    // 8. The program registers a block the shim had registered: the shim steps aside, the
    //    program's call succeeds, and from then on the registration is the program's.
    round_trip(m, N, 19);
    EXPECT_REGS(5, 4);
    CK(cuMemHostRegister(m, N, 0));
    EXPECT_REGS(5, 5, 1);  // the shim's registration dropped, the program's made
    round_trip(m, N, 21);
    CK(cuMemHostUnregister(m));
    CHECK(munmap(m, N) == 0);
    EXPECT_REGS(5, 5, 1, 1);  // munmap after the program's own unregister: nothing of the shim's left
  }

  {
    // 9. Copies from memory no tracked block covers (here: below the tracking threshold and then
    //    a large unaligned slice of a mapping), and unaligned edges: data must be exact.
    void* m = map(N);
    unsigned char* p = static_cast<unsigned char*>(m) + 123;
    round_trip(p, N - 4096, 23);
    CHECK(munmap(m, N) == 0);
  }

  {
    // 10. 16 threads, each with its own block, copying and freeing at once.
    preload::on_threads(16, [](int t, CUdeviceptr dev) {
      for (int i = 0; i < 4; ++i) {
        void* h = map(8 * MiB);
        fill(h, 8 * MiB, static_cast<uint32_t>(t * 100 + i));
        if (cuMemcpyHtoD(dev, h, 8 * MiB) || cuMemcpyHtoD(dev, h, 8 * MiB)) return false;
        if (!same(preload::dev_ptr<unsigned char>(dev), h, 8 * MiB)) return false;
        CHECK(munmap(h, 8 * MiB) == 0);
      }
      return true;
    });
  }

  return passed();
}
