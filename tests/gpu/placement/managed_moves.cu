// How fast managed memory moves each way with cuMemPrefetchAsync, by chunk size and number of
// streams, and both ways at once (2 GiB of managed memory). Build: nvcc -O2 -arch=sm_90; ADVISE=1
// first advises preferred location host and accessed-by device, as spill does.
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
__global__ void touch(char* p, size_t n) { for (size_t i = (blockIdx.x * blockDim.x + threadIdx.x) * 4096ull; i < n; i += 4096ull * gridDim.x * blockDim.x) p[i] = 1; }
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static cudaStream_t st[8];
static int move(char* p, size_t n, bool to_dev, size_t chunk, int streams) {
  cudaMemLocation loc; loc.type = to_dev ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost; loc.id = 0;
  int k = 0;
  for (size_t o = 0; o < n; o += chunk, ++k) {
    size_t b = n - o < chunk ? n - o : chunk;
    CK(cudaMemPrefetchAsync(p + o, b, loc, 0, st[k % streams]));
  }
  return 0;
}
int main() {
  const size_t G = 1ull << 30;
  for (auto& s : st) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  char *a, *b;
  CK(cudaMallocManaged(&a, G)); CK(cudaMallocManaged(&b, G));
  cudaMemLocation host{cudaMemLocationTypeHost, 0};
  if (getenv("ADVISE")) {
    CK(cudaMemAdvise(a, G, cudaMemAdviseSetPreferredLocation, host));
    cudaMemLocation dev{cudaMemLocationTypeDevice, 0};
    CK(cudaMemAdvise(a, G, cudaMemAdviseSetAccessedBy, dev));
    CK(cudaMemAdvise(b, G, cudaMemAdviseSetPreferredLocation, host));
    CK(cudaMemAdvise(b, G, cudaMemAdviseSetAccessedBy, dev));
  }
  touch<<<1024, 256>>>(a, G); touch<<<1024, 256>>>(b, G);
  CK(cudaDeviceSynchronize());
  struct Cfg { size_t chunk; int streams; const char* name; } cfgs[] = {
      {G, 1, "whole, 1 stream"}, {64 << 20, 1, "64 MiB, 1 stream"}, {64 << 20, 4, "64 MiB, 4 streams"},
      {16 << 20, 8, "16 MiB, 8 streams"}, {2 << 20, 1, "2 MiB, 1 stream"}};
  for (int round = 0; round < 2; ++round)
    for (auto& c : cfgs) {
      double t0 = now(); move(a, G, false, c.chunk, c.streams); CK(cudaDeviceSynchronize());
      double t1 = now(); move(a, G, true, c.chunk, c.streams); CK(cudaDeviceSynchronize());
      double t2 = now();
      printf("r%d %-18s to host %5.1f GB/s  to device %5.1f GB/s\n", round, c.name, G / (t1 - t0) / 1e9, G / (t2 - t1) / 1e9);
    }
  // duplex: a out while b in (b starts on host)
  move(b, G, false, G, 1); CK(cudaDeviceSynchronize());
  for (int round = 0; round < 2; ++round) {
    double t0 = now();
    move(a, G, false, 64 << 20, 1);  // stream 0
    cudaMemLocation dl{cudaMemLocationTypeDevice, 0};
    for (size_t o = 0; o < G; o += 64 << 20) CK(cudaMemPrefetchAsync(b + o, 64 << 20, dl, 0, st[1]));
    CK(cudaDeviceSynchronize());
    double t1 = now();
    printf("duplex r%d: 1 GiB out + 1 GiB in in %.1f ms (%.1f GB/s each way)\n", round, (t1 - t0) * 1e3, G / (t1 - t0) / 1e9);
    std::swap(a, b);
  }
  // host-touched pages: does a CPU write before change eviction speed next time?
  move(a, G, false, G, 1); CK(cudaDeviceSynchronize());
  memset(a, 2, G);
  move(a, G, true, G, 1); CK(cudaDeviceSynchronize());
  double t0 = now(); move(a, G, false, G, 1); CK(cudaDeviceSynchronize());
  printf("after CPU touch: to host %.1f GB/s\n", G / (now() - t0) / 1e9);
  return 0;
}
