// A CUDA program that knows exactly how many allocations, frees, copies (by direction and by host
// memory kind), memsets and kernel launches it makes, and says so.
//
// Output, on stdout (both lines are deterministic, so the output of a run under the shim must be
// byte-for-byte the output of a run without it):
//   checksum <fnv1a-64 of every result buffer> sum <sum of the results, %.17g>
//   {"expected": {...}}   one JSON line, keyed like the shim's statistics (see shim/core/stats.cc)
//
// Every CUDA call goes through one of the small wrappers below, and each wrapper both makes the
// call and counts it, so the expected counts cannot drift away from what the program really does.
// Only the runtime API is used (cudaMalloc, cudaMemcpy[Async], cudaMemset[Async], <<<>>>): the
// point is to check that the shim, which sits under the runtime at the driver level, sees each
// runtime call exactly once, for the static and the shared runtime alike.
#include <cuda_runtime.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void check(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "counts: %s failed at line %d: %s\n", what, line, cudaGetErrorString(e));
    std::exit(1);
  }
}
#define CHECK(call) check((call), #call, __LINE__)

struct Tally {
  uint64_t calls = 0, bytes = 0;
  void add(uint64_t b) { ++calls, bytes += b; }
};

// What the shim should report, named as in its JSON statistics.
struct Expected {
  Tally mem_alloc, mem_free, host_alloc, host_free, memcpy, memset;
  Tally htod, dtoh, dtod;
  Tally pageable, pinned;
  uint64_t launches = 0;
  uint64_t live_device = 0, peak_device = 0, live_pinned = 0, peak_pinned = 0;
} g_exp;

void live_add(uint64_t& live, uint64_t& peak, uint64_t b) {
  live += b;
  if (live > peak) peak = live;
}

enum class Host { pageable, pinned };
enum class Mode { sync, async };

void host_kind(Host h, uint64_t b) { (h == Host::pinned ? g_exp.pinned : g_exp.pageable).add(b); }

float* dev_alloc(size_t bytes) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, bytes));
  g_exp.mem_alloc.add(bytes);
  live_add(g_exp.live_device, g_exp.peak_device, bytes);
  return static_cast<float*>(p);
}

void dev_free(float* p, size_t bytes) {
  CHECK(cudaFree(p));
  g_exp.mem_free.add(bytes);
  g_exp.live_device -= bytes;
}

float* pinned_alloc(size_t bytes) {
  void* p = nullptr;
  CHECK(cudaMallocHost(&p, bytes));
  g_exp.host_alloc.add(bytes);
  live_add(g_exp.live_pinned, g_exp.peak_pinned, bytes);
  return static_cast<float*>(p);
}

void pinned_free(float* p, size_t bytes) {
  CHECK(cudaFreeHost(p));
  g_exp.host_free.add(bytes);
  g_exp.live_pinned -= bytes;
}

void htod(float* d, const float* h, size_t bytes, Host kind, Mode mode, cudaStream_t s) {
  if (mode == Mode::sync) {
    CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  } else {
    CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
  }
  g_exp.memcpy.add(bytes);
  g_exp.htod.add(bytes);
  host_kind(kind, bytes);
}

void dtoh(float* h, const float* d, size_t bytes, Host kind, Mode mode, cudaStream_t s) {
  if (mode == Mode::sync) {
    CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
  } else {
    CHECK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s));
  }
  g_exp.memcpy.add(bytes);
  g_exp.dtoh.add(bytes);
  host_kind(kind, bytes);
}

void dtod(float* dst, const float* src, size_t bytes) {
  CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
  g_exp.memcpy.add(bytes);
  g_exp.dtod.add(bytes);
}

void memset_dev(float* d, int value, size_t bytes, Mode mode, cudaStream_t s) {
  if (mode == Mode::sync) {
    CHECK(cudaMemset(d, value, bytes));
  } else {
    CHECK(cudaMemsetAsync(d, value, bytes, s));
  }
  g_exp.memset.add(bytes);
}

__global__ void saxpy(size_t n, float a, const float* x, const float* y, float* z) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) z[i] = a * x[i] + y[i];
}

__global__ void scale_add(size_t n, float a, float b, float* x) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + 255) / 256); }

void launch_saxpy(size_t n, float a, const float* x, const float* y, float* z, cudaStream_t s) {
  saxpy<<<blocks_for(n), 256, 0, s>>>(n, a, x, y, z);
  CHECK(cudaGetLastError());
  ++g_exp.launches;
}

void launch_scale_add(size_t n, float a, float b, float* x, cudaStream_t s) {
  scale_add<<<blocks_for(n), 256, 0, s>>>(n, a, b, x);
  CHECK(cudaGetLastError());
  ++g_exp.launches;
}

struct Checksum {
  uint64_t fnv = 1469598103934665603ull;
  double sum = 0;
  void add(const float* p, size_t n) {
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n * sizeof(float); ++i) fnv = (fnv ^ b[i]) * 1099511628211ull;
    for (size_t i = 0; i < n; ++i) sum += p[i];
  }
};

// One round on n floats: every copy direction, sync and async, from pageable and from pinned host
// memory, two memsets, one device-to-device copy and three launches, with results read back.
void round_trip(size_t n, int round, cudaStream_t s, Checksum& sum) {
  const size_t bytes = n * sizeof(float);
  float* x = dev_alloc(bytes);
  float* y = dev_alloc(bytes);
  float* z = dev_alloc(bytes);
  float* w = dev_alloc(bytes);
  float* pin_a = pinned_alloc(bytes);
  float* pin_b = pinned_alloc(bytes);
  std::vector<float> page_a(n), page_b(n), page_c(n);
  for (size_t i = 0; i < n; ++i) {
    page_a[i] = static_cast<float>((i * 7 + round) % 1009) * 0.25f;
    pin_a[i] = static_cast<float>((i * 13 + 3 * round) % 997) * 0.5f - 100.0f;
  }

  htod(x, page_a.data(), bytes, Host::pageable, Mode::sync, s);   // x = page_a
  htod(y, pin_a, bytes, Host::pinned, Mode::async, s);            // y = pin_a (on s)
  memset_dev(z, 0, bytes, Mode::async, s);                        // z = 0 (on s, overwritten next)
  launch_saxpy(n, 1.5f, x, y, z, s);                              // z = 1.5 x + y
  CHECK(cudaStreamSynchronize(s));
  memset_dev(w, 0x7f, bytes, Mode::sync, s);                      // w = garbage, overwritten next
  dtod(w, z, bytes);                                              // w = z
  launch_scale_add(n, 0.5f, 2.0f, w, nullptr);                    // w = 0.5 w + 2 (legacy stream)
  dtoh(page_b.data(), z, bytes, Host::pageable, Mode::async, s);  // page_b = z
  CHECK(cudaStreamSynchronize(s));
  dtoh(pin_b, w, bytes, Host::pinned, Mode::sync, s);             // pin_b = w

  htod(x, page_b.data(), bytes, Host::pageable, Mode::async, s);  // x = z
  CHECK(cudaStreamSynchronize(s));
  htod(y, pin_b, bytes, Host::pinned, Mode::sync, s);             // y = w
  launch_saxpy(n, -0.75f, x, y, z, s);                            // z = -0.75 x + y (s waits: legacy)
  dtoh(pin_a, z, bytes, Host::pinned, Mode::async, s);            // pin_a = z
  CHECK(cudaStreamSynchronize(s));
  dtoh(page_c.data(), y, bytes, Host::pageable, Mode::sync, s);   // page_c = y

  sum.add(page_b.data(), n);
  sum.add(pin_b, n);
  sum.add(pin_a, n);
  sum.add(page_c.data(), n);

  pinned_free(pin_b, bytes);
  pinned_free(pin_a, bytes);
  dev_free(w, bytes);
  dev_free(z, bytes);
  dev_free(y, bytes);
  dev_free(x, bytes);
}

void print_tally(const char* name, const Tally& t, bool last) {
  std::printf("\"%s\": {\"calls\": %" PRIu64 ", \"bytes\": %" PRIu64 "}%s", name, t.calls, t.bytes, last ? "" : ", ");
}

}  // namespace

int main() {
  // Odd sizes too: the shim must count what the program asked for, not what a pool rounds it to.
  // The largest is 12 MiB per buffer, 72 MiB in all at a time.
  const size_t sizes[] = {1, 1000, 65536 + 7, 1u << 20, (3u << 20) + 5};
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  Checksum sum;
  int round = 0;
  for (size_t n : sizes) round_trip(n, round++, s, sum);
  CHECK(cudaStreamDestroy(s));

  std::printf("checksum %016" PRIx64 " sum %.17g\n", sum.fnv, sum.sum);
  std::printf("{\"expected\": {\"families\": {");
  print_tally("mem_alloc", g_exp.mem_alloc, false);
  print_tally("mem_free", g_exp.mem_free, false);
  print_tally("host_alloc", g_exp.host_alloc, false);
  print_tally("host_free", g_exp.host_free, false);
  print_tally("memcpy", g_exp.memcpy, false);
  print_tally("memset", g_exp.memset, false);
  std::printf("\"launch\": {\"calls\": %" PRIu64 "}}, \"copies_by_direction\": {", g_exp.launches);
  print_tally("htod", g_exp.htod, false);
  print_tally("dtoh", g_exp.dtoh, false);
  print_tally("dtod", g_exp.dtod, false);
  print_tally("peer", Tally{}, false);
  print_tally("htoh", Tally{}, true);
  std::printf("}, \"copies_by_host_kind\": {");
  print_tally("pageable", g_exp.pageable, false);
  print_tally("pinned", g_exp.pinned, false);
  print_tally("managed", Tally{}, true);
  std::printf("}, \"peak_live_bytes\": {\"device\": %" PRIu64 ", \"pinned_host\": %" PRIu64 "}",
              g_exp.peak_device, g_exp.peak_pinned);
  std::printf(", \"live_bytes_at_exit\": {\"device\": %" PRIu64 ", \"pinned_host\": %" PRIu64 "}",
              g_exp.live_device, g_exp.live_pinned);
  std::printf(", \"launches_total\": %" PRIu64 "}}\n", g_exp.launches);
  return 0;
}
