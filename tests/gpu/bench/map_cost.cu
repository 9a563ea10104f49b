// What remapping movable memory costs (docs/design/schedule.md): cuMemMap, cuMemSetAccess and
// cuMemUnmap of 64 MiB chunks over device-located and host-located cuMemCreate memory, in ms per
// GiB, the second and third of three rounds. No shim; 1 GiB of each kind at most.
//   nvcc -O2 -o map_cost tests/gpu/bench/map_cost.cu -lcuda && ./map_cost
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <vector>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s; cuGetErrorString(r_, &s); std::printf("%s: %s (line %d)\n", #x, s, __LINE__); return 1; } } while (0)
using clk = std::chrono::steady_clock;
static double ms(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

int run(const char* name, CUmemLocationType type, int id, size_t chunk, int n, bool touch) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = type;
  p.location.id = id;
  size_t gran = 0, rec = 0;
  CK(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CK(cuMemGetAllocationGranularity(&rec, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  std::vector<CUmemGenericAllocationHandle> h(n);
  auto t0 = clk::now();
  for (auto& x : h) CK(cuMemCreate(&x, chunk, &p, 0));
  auto t1 = clk::now();
  CUdeviceptr va;
  CK(cuMemAddressReserve(&va, chunk * n, 0, 0, 0));
  CUmemAccessDesc d{};
  d.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  double tmap = 0, tacc = 0, tun = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto a = clk::now();
    for (int i = 0; i < n; ++i) CK(cuMemMap(va + i * chunk, chunk, 0, h[i], 0));
    auto b = clk::now();
    for (int i = 0; i < n; ++i) CK(cuMemSetAccess(va + i * chunk, chunk, &d, 1));
    auto c = clk::now();
    if (touch) { CK(cuMemsetD8(va, 1, chunk * n)); CK(cuCtxSynchronize()); }
    auto c2 = clk::now();
    for (int i = 0; i < n; ++i) CK(cuMemUnmap(va + i * chunk, chunk));
    auto e = clk::now();
    if (rep) { tmap += ms(a, b); tacc += ms(b, c); tun += ms(c2, e); }
  }
  double gib = double(chunk) * n / (1 << 30) * 2;
  std::printf("%-28s gran %zu KiB rec %zu KiB: create %.2f ms/GiB; map %.2f, access %.2f, unmap %.2f ms/GiB%s\n", name,
              gran >> 10, rec >> 10, ms(t0, t1) / (gib / 2), tmap / gib, tacc / gib, tun / gib, touch ? " (touched)" : "");
  CK(cuMemAddressFree(va, chunk * n));
  for (auto& x : h) CK(cuMemRelease(x));
  return 0;
}

int main() {
  CK(cuInit(0));
  CUdevice dev; CK(cuDeviceGet(&dev, 0));
  CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  const size_t chunk = 64ull << 20;
  run("device", CU_MEM_LOCATION_TYPE_DEVICE, 0, chunk, 16, false);
  run("host", CU_MEM_LOCATION_TYPE_HOST, 0, chunk, 16, false);
  run("host", CU_MEM_LOCATION_TYPE_HOST, 0, chunk, 16, true);
  run("host_numa 0", CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, chunk, 16, false);
  run("device", CU_MEM_LOCATION_TYPE_DEVICE, 0, chunk, 16, true);
  run("host 2 MiB chunks", CU_MEM_LOCATION_TYPE_HOST, 0, 2ull << 20, 512, false);
  return 0;
}
