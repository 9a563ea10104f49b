// Whether one virtual range can move between device and host memory at copy-engine speed, for
// eviction that managed memory does at 13 to 15 GB/s (managed_moves.cu): the range is reserved
// once, backed by device memory (cuMemCreate on the device) or host memory (cuMemCreate on the
// host, mapped for the device), and moving it is a copy into the other kind plus a remap. Measures,
// for 1 GiB in chunks of 64 MiB: creating each kind, the copies each way, the remap, a kernel
// reading the range in each place, the data kept through two moves, and whether cuMemUnmap/cuMemMap
// wait for unrelated work queued on the device. Build: nvcc -O2 -arch=sm_90 vmm_moves.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <vector>

#define CU(x)                                                          \
  do {                                                                 \
    CUresult r_ = (x);                                                 \
    if (r_ != CUDA_SUCCESS) {                                          \
      const char* s_ = nullptr;                                        \
      cuGetErrorName(r_, &s_);                                         \
      std::printf("%s: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

namespace {

constexpr size_t MiB = 1ull << 20, GiB = 1ull << 30, kChunk = 64 * MiB, kBytes = GiB;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

__global__ void fill(unsigned long long* p, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = i * 2654435761ull + seed;
}
__global__ void sum(const unsigned long long* p, size_t n, unsigned long long* out) {
  unsigned long long s = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) s += p[i];
  atomicAdd(out, s);
}
// Busy for about `ns` nanoseconds on one block: unrelated queued work.
__global__ void spin(unsigned long long ns) {
  unsigned long long t0 = clock64();
  while (clock64() - t0 < ns * 2) {
  }
}

CUmemAllocationProp prop_of(bool host) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  return p;
}

// Creates n chunks of one kind.
int create(bool host, std::vector<CUmemGenericAllocationHandle>& out, size_t n) {
  CUmemAllocationProp p = prop_of(host);
  out.resize(n);
  for (auto& h : out) CU(cuMemCreate(&h, kChunk, &p, 0));
  return 0;
}

// Maps the chunks over [va, va + n chunks) and lets the device (and for host chunks the CPU) use them.
int map(CUdeviceptr va, const std::vector<CUmemGenericAllocationHandle>& hs, bool host) {
  for (size_t i = 0; i < hs.size(); ++i) CU(cuMemMap(va + i * kChunk, kChunk, 0, hs[i], 0));
  CUmemAccessDesc d[2]{};
  d[0].location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  d[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  d[1].location = {CU_MEM_LOCATION_TYPE_HOST, 0};
  d[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(va, hs.size() * kChunk, d, host ? 2 : 1));
  return 0;
}

unsigned long long checksum(CUdeviceptr va, unsigned long long* out, double* gbs) {
  cudaMemset(out, 0, sizeof(*out));
  cudaDeviceSynchronize();
  double t0 = now();
  sum<<<1024, 256>>>(reinterpret_cast<const unsigned long long*>(va), kBytes / 8, out);
  cudaDeviceSynchronize();
  *gbs = kBytes / (now() - t0) / 1e9;
  unsigned long long s = 0;
  cudaMemcpy(&s, out, sizeof(s), cudaMemcpyDeviceToHost);
  return s;
}

}  // namespace

int main() {
  CU(cuInit(0));
  cudaFree(nullptr);  // the runtime's primary context, current on this thread
  size_t gran = 0;
  CUmemAllocationProp pd = prop_of(false), ph = prop_of(true);
  CU(cuMemGetAllocationGranularity(&gran, &pd, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t gran_h = 0;
  CU(cuMemGetAllocationGranularity(&gran_h, &ph, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  std::printf("granularity: device %zu KiB, host %zu KiB\n", gran >> 10, gran_h >> 10);
  const size_t n = kBytes / kChunk;
  unsigned long long* out = nullptr;
  cudaMalloc(&out, sizeof(*out));
  cudaStream_t cs;
  cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);

  // The program's range, and a second range through which the other kind is filled.
  CUdeviceptr va = 0, side = 0;
  CU(cuMemAddressReserve(&va, kBytes, 0, 0, 0));
  CU(cuMemAddressReserve(&side, kBytes, 0, 0, 0));
  std::vector<CUmemGenericAllocationHandle> dev, host;
  double t0 = now();
  if (create(false, dev, n)) return 1;
  double t1 = now();
  if (create(true, host, n)) return 1;
  double t2 = now();
  std::printf("create 1 GiB in 64 MiB chunks: device %.1f ms, host %.1f ms\n", (t1 - t0) * 1e3, (t2 - t1) * 1e3);
  if (map(va, dev, false) || map(side, host, true)) return 1;
  fill<<<1024, 256>>>(reinterpret_cast<unsigned long long*>(va), kBytes / 8, 7);
  cudaDeviceSynchronize();
  double g_dev = 0, g_host = 0;
  unsigned long long want = checksum(va, out, &g_dev);

  for (int round = 0; round < 2; ++round) {
    // Out: device -> host by the copy engine, then the range is backed by the host chunks.
    double a = now();
    cudaMemcpyAsync(reinterpret_cast<void*>(side), reinterpret_cast<void*>(va), kBytes, cudaMemcpyDeviceToDevice, cs);
    cudaStreamSynchronize(cs);
    double b = now();
    CU(cuMemUnmap(va, kBytes));
    CU(cuMemUnmap(side, kBytes));
    if (map(va, host, true) || map(side, dev, false)) return 1;
    double c = now();
    unsigned long long got = checksum(va, out, &g_host);
    std::printf("r%d out: copy %.1f GB/s, remap %.2f ms; kernel reads it on the host at %.1f GB/s (on the device %.1f); data %s\n",
                round, kBytes / (b - a) / 1e9, (c - b) * 1e3, g_host, g_dev, got == want ? "kept" : "LOST");
    // In: host -> device, and the range is backed by device chunks again.
    a = now();
    cudaMemcpyAsync(reinterpret_cast<void*>(side), reinterpret_cast<void*>(va), kBytes, cudaMemcpyDeviceToDevice, cs);
    cudaStreamSynchronize(cs);
    b = now();
    CU(cuMemUnmap(va, kBytes));
    CU(cuMemUnmap(side, kBytes));
    if (map(va, dev, false) || map(side, host, true)) return 1;
    c = now();
    got = checksum(va, out, &g_dev);
    std::printf("r%d in:  copy %.1f GB/s, remap %.2f ms; data %s\n", round, kBytes / (b - a) / 1e9, (c - b) * 1e3,
                got == want ? "kept" : "LOST");
  }

  // Each step of a remap on its own (the range is on the device now, the host chunks mapped at side).
  {
    double t[6];
    t[0] = now();
    CU(cuMemUnmap(va, kBytes));
    t[1] = now();
    for (size_t i = 0; i < n; ++i) CU(cuMemMap(va + i * kChunk, kChunk, 0, host[i], 0));
    t[2] = now();
    CUmemAccessDesc d{};
    d.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, kBytes, &d, 1));  // the device only: the CPU reaches the host chunks at side
    t[3] = now();
    unsigned long long got = checksum(va, out, &g_host);
    t[4] = now();
    CU(cuMemUnmap(va, kBytes));
    for (size_t i = 0; i < n; ++i) CU(cuMemMap(va + i * kChunk, kChunk, 0, dev[i], 0));
    CU(cuMemSetAccess(va, kBytes, &d, 1));
    t[5] = now();
    std::printf("steps, 1 GiB: unmap device-backed %.2f ms, map host chunks %.2f ms, device access %.2f ms; back to the device %.2f ms; data %s\n",
                (t[1] - t[0]) * 1e3, (t[2] - t[1]) * 1e3, (t[3] - t[2]) * 1e3, (t[5] - t[4]) * 1e3, got == want ? "kept" : "LOST");
  }

  // Chunk by chunk, as the shim remaps (unmap, map, device access for each), against the whole
  // range at once: does the driver charge per call or per byte?
  {
    CUmemAccessDesc d{};
    d.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    double t[5];
    t[0] = now();
    for (size_t i = 0; i < n; ++i) {
      CU(cuMemUnmap(va + i * kChunk, kChunk));
      CU(cuMemMap(va + i * kChunk, kChunk, 0, host[i], 0));
      CU(cuMemSetAccess(va + i * kChunk, kChunk, &d, 1));
    }
    t[1] = now();
    for (size_t i = 0; i < n; ++i) {
      CU(cuMemUnmap(va + i * kChunk, kChunk));
      CU(cuMemMap(va + i * kChunk, kChunk, 0, dev[i], 0));
      CU(cuMemSetAccess(va + i * kChunk, kChunk, &d, 1));
    }
    t[2] = now();
    CU(cuMemUnmap(va, kBytes));
    for (size_t i = 0; i < n; ++i) CU(cuMemMap(va + i * kChunk, kChunk, 0, host[i], 0));
    CU(cuMemSetAccess(va, kBytes, &d, 1));
    t[3] = now();
    CU(cuMemUnmap(va, kBytes));
    for (size_t i = 0; i < n; ++i) CU(cuMemMap(va + i * kChunk, kChunk, 0, dev[i], 0));
    CU(cuMemSetAccess(va, kBytes, &d, 1));
    t[4] = now();
    double g = 0;
    unsigned long long got = checksum(va, out, &g);
    std::printf("remap 1 GiB chunk by chunk: to host %.2f ms, to device %.2f ms; whole range at once: to host %.2f ms, to device %.2f ms; data %s\n",
                (t[1] - t[0]) * 1e3, (t[2] - t[1]) * 1e3, (t[3] - t[2]) * 1e3, (t[4] - t[3]) * 1e3, got == want ? "kept" : "LOST");
  }

  // Does a remap wait for unrelated queued work? 300 ms of spinning on another stream first.
  spin<<<1, 1, 0, cs>>>(300000000ull);
  double a = now();
  CU(cuMemUnmap(side, kBytes));
  CU(cuMemUnmap(va, kBytes));
  if (map(va, host, true) || map(side, dev, false)) return 1;
  double b = now();
  cudaStreamSynchronize(cs);
  double c = now();
  std::printf("remap with 300 ms of unrelated work queued: %.2f ms (then %.1f ms until it finished): %s\n", (b - a) * 1e3,
              (c - b) * 1e3, (b - a) < 0.1 ? "does not wait" : "WAITS");

  CU(cuMemUnmap(va, kBytes));
  CU(cuMemUnmap(side, kBytes));
  for (auto h : dev) CU(cuMemRelease(h));
  for (auto h : host) CU(cuMemRelease(h));
  CU(cuMemAddressFree(va, kBytes));
  CU(cuMemAddressFree(side, kBytes));
  std::printf("vmm moves done\n");
  return 0;
}
