// One-shot copies between the host and the device, as programs make them, at 1 MiB, 40 MB, 1 GiB
// and 4 GiB, both directions:
//   copy_bench pageable   a new malloc'd buffer per copy: the source written first (host to
//                         device), the destination fresh (device to host, as .cpu() gets it)
//   copy_bench pinned     cudaMallocHost buffers: the link's speed, the yardstick
//   copy_bench reuse      one malloc'd buffer copied 20 times (the S2 pattern, registration pays)
//   copy_bench check      integrity: every path, both directions, checksums, an async copy
//                         whose source is overwritten as soon as the call returns, and
//                         file-backed mappings (read-only and read-write)
// Run it with and without the shim; one JSON line per measurement.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                                    \
  do {                                                                                              \
    cudaError_t e = (x);                                                                            \
    if (e != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));      \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i += 4096) p[i] = static_cast<unsigned char>(seed + i / 4096);
  p[n - 1] = static_cast<unsigned char>(seed * 7);
}

static unsigned long long sum(const unsigned char* p, size_t n) {
  unsigned long long s = 0;
  for (size_t i = 0; i < n; i += 4096) s += p[i] * (i / 4096 + 1);
  return s + p[n - 1];
}

static void report(const char* mode, const char* dir, size_t n, double secs, int reps) {
  std::printf("{\"mode\": \"%s\", \"dir\": \"%s\", \"bytes\": %zu, \"gbps\": %.2f}\n", mode, dir, n,
              static_cast<double>(n) * reps / secs / 1e9);
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "pageable";
  const size_t sizes[] = {1ull << 20, 40000000ull, 1ull << 30, 4ull << 30};
  unsigned char* dev = nullptr;
  CHECK(cudaMalloc(&dev, 4ull << 30));
  CHECK(cudaMemset(dev, 1, 4ull << 30));
  if (std::strcmp(mode, "check") == 0) {
    // Every path: small (driver), large one-shot (staged or registered), reused (registered).
    for (size_t n : {size_t{1} << 20, size_t{40000000}, size_t{1} << 30}) {
      for (int rep = 0; rep < 3; ++rep) {
        auto* h = static_cast<unsigned char*>(std::malloc(n));
        fill(h, n, 11 + rep);
        unsigned long long want = sum(h, n);
        CHECK(cudaMemcpy(dev, h, n, cudaMemcpyHostToDevice));
        std::memset(h, 0, n);
        CHECK(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost));
        if (sum(h, n) != want) { std::fprintf(stderr, "round trip of %zu bytes: wrong data\n", n); return 1; }
        // Async from pageable memory, then the source overwritten at once: the device must hold
        // what was in the buffer when the call was made.
        fill(h, n, 77 + rep);
        want = sum(h, n);
        CHECK(cudaMemcpyAsync(dev, h, n, cudaMemcpyHostToDevice, 0));
        std::memset(h, 0xAB, n);
        CHECK(cudaDeviceSynchronize());
        std::memset(h, 0, n);
        CHECK(cudaMemcpyAsync(h, dev, n, cudaMemcpyDeviceToHost, 0));
        unsigned long long got = sum(h, n);  // read at once: the data must be there on return
        if (got != want) { std::fprintf(stderr, "async of %zu bytes: wrong data (%llu vs %llu)\n", n, got, want); return 1; }
        std::free(h);
      }
    }
    // File-backed mappings (np.load(mmap_mode=...)): read-only to the device, then read-write
    // from the device, three times each so that a registration (read-only, then read-write) is
    // made and used; the file must hold what the device wrote.
    {
      const size_t n = 64ull << 20;
      char path[] = "/tmp/gms-copy-bench-XXXXXX";
      int fd = mkstemp(path);
      if (fd < 0 || ftruncate(fd, static_cast<off_t>(n)) != 0) { std::perror("mkstemp/ftruncate"); return 1; }
      unlink(path);
      auto* w = static_cast<unsigned char*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
      if (w == MAP_FAILED) { std::perror("mmap"); return 1; }
      fill(w, n, 5);
      unsigned long long want = sum(w, n);
      CHECK(cudaDeviceSynchronize());
      auto* ro = static_cast<unsigned char*>(mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0));
      if (ro == MAP_FAILED) { std::perror("mmap read-only"); return 1; }
      auto* back = static_cast<unsigned char*>(std::malloc(n));
      for (int rep = 0; rep < 3; ++rep) {
        CHECK(cudaMemset(dev, 0, n));
        CHECK(cudaMemcpy(dev, ro, n, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost));
        if (sum(back, n) != want) { std::fprintf(stderr, "read-only file mapping: wrong data\n"); return 1; }
      }
      for (int rep = 0; rep < 3; ++rep) {
        fill(back, n, 40 + rep);
        want = sum(back, n);
        CHECK(cudaMemcpy(dev, back, n, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(w, dev, n, cudaMemcpyDeviceToHost));
        if (msync(w, n, MS_SYNC) != 0) { std::perror("msync"); return 1; }
        std::vector<unsigned char> file(n);
        if (pread(fd, file.data(), n, 0) != static_cast<ssize_t>(n) || sum(file.data(), n) != want) {
          std::fprintf(stderr, "read-write file mapping: the file does not hold the device's data\n");
          return 1;
        }
      }
      std::free(back);
      munmap(ro, n);
      munmap(w, n);
      close(fd);
    }
    std::printf("{\"check\": \"ok\"}\n");
    return 0;
  }
  for (size_t n : sizes) {
    // Many reps at 1 MiB: a single copy takes about 0.1 ms, too short to time a few of.
    int reps = n <= (1ull << 20) ? 200 : n <= (40ull << 20) ? 20 : 3;
    for (int dir = 0; dir < 2; ++dir) {
      double total = 0;
      unsigned char* pinned = nullptr;
      unsigned char* reused = nullptr;
      if (std::strcmp(mode, "pinned") == 0) { CHECK(cudaMallocHost(&pinned, n)); fill(pinned, n, 3); }
      if (std::strcmp(mode, "reuse") == 0) { reused = static_cast<unsigned char*>(std::malloc(n)); fill(reused, n, 3); }
      for (int r = -1; r < reps; ++r) {  // r = -1: warm-up, not counted
        unsigned char* h = pinned ? pinned : reused;
        if (!h) {
          h = static_cast<unsigned char*>(std::malloc(n));
          if (dir == 0) fill(h, n, r);
        }
        CHECK(cudaDeviceSynchronize());
        double t0 = now();
        if (dir == 0) {
          CHECK(cudaMemcpy(dev, h, n, cudaMemcpyHostToDevice));
        } else {
          CHECK(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost));
        }
        double t = now() - t0;
        if (r >= 0) total += t;
        if (!pinned && !reused) std::free(h);
      }
      report(mode, dir == 0 ? "htod" : "dtoh", n, total, reps);
      if (pinned) CHECK(cudaFreeHost(pinned));
      std::free(reused);
    }
  }
  CHECK(cudaFree(dev));
  return 0;
}
