// What slows the driver's mapping calls down while the GPU moves data: cuMemMap of two fresh 64 MiB
// device chunks at a fresh place in a reserved range, one cuMemSetAccess over both (128 MiB) and
// one over a 64 MiB side range, and cuMemUnmap, each while 2 GiB of copies of one kind run.
// Policy swap (shim/act/placement.cc) maps a new chunk before the evictions that make its room
// start copying because of it. On the H100 (2026-11-22): cuMemSetAccess over 128 MiB takes
// 0.08 ms idle, 1.9 to 2.1 ms while copies to the host run (copy engine or SM copies, 2 MiB to
// 512 MiB pieces, any stream priority), 0.10 to 0.15 ms while copies to the device or within the
// device run: about 15 ms per GiB against 1. Build: nvcc -O2 -arch=sm_90 vmm_access.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include "vmm_probe.h"
__global__ void kcopy(int4* dst, const int4* src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) dst[i] = src[i];
}
int main() {
  cudaFree(0);
  CUmemAllocationProp pd = prop_of(false);
  int lo, hi; CU(cuCtxGetStreamPriorityRange(&lo, &hi));
  CUstream s1, s2, l1, l2;
  CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING)); CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CU(cuStreamCreateWithPriority(&l1, CU_STREAM_NON_BLOCKING, lo)); CU(cuStreamCreateWithPriority(&l2, CU_STREAM_NON_BLOCKING, lo));
  CUdeviceptr pool; const size_t kPool = 64 * kChunk; CU(cuMemAddressReserve(&pool, kPool, kChunk, 0, 0));
  size_t next = 0;
  CUdeviceptr dv, hv, dv2, hv2; // VMM device and host memory, 512 MiB each, like the shim's side ranges
  if (vmm(&dv, 512 * MiB, false) || vmm(&hv, 512 * MiB, true) || vmm(&dv2, 512 * MiB, false) || vmm(&hv2, 512 * MiB, true)) return 1;
  void* pin; CU(cuMemAllocHost(&pin, 512 * MiB));
  struct Busy { const char* name; int kind; size_t piece; };
  Busy cases[] = {{"idle", 0, 0}, {"vmm D->H one way 64M pieces", 1, 64 * MiB}, {"vmm H->D one way 64M", 2, 64 * MiB},
                  {"vmm both ways 64M", 3, 64 * MiB}, {"vmm both ways 8M", 3, 8 * MiB}, {"vmm both ways 2M", 3, 2 * MiB},
                  {"vmm both ways 512M", 3, 512 * MiB}, {"vmm both ways 64M low prio", 4, 64 * MiB},
                  {"pinned both ways 64M", 5, 64 * MiB}, {"vmm D->D 64M", 6, 64 * MiB}, {"SM copy D->H 64M 16 blk", 7, 64 * MiB}, {"SM copy D->H 64M 132 blk", 8, 64 * MiB},
                  {"SM copy both 64M 132 blk", 9, 64 * MiB}};
  // bandwidth of the SM copies
  for (int blocks : {8, 16, 32, 66, 132, 264}) {
    CU(cuCtxSynchronize()); double t0 = now();
    for (int k = 0; k < 8; ++k) kcopy<<<blocks, 1024, 0, (cudaStream_t)s1>>>((int4*)hv, (const int4*)dv, 512 * MiB / 16);
    CU(cuCtxSynchronize()); double t1 = now();
    for (int k = 0; k < 8; ++k) kcopy<<<blocks, 1024, 0, (cudaStream_t)s1>>>((int4*)dv2, (const int4*)hv2, 512 * MiB / 16);
    CU(cuCtxSynchronize()); double t2 = now();
    for (int k = 0; k < 8; ++k) CU(cuMemcpyDtoDAsync(hv, dv, 512 * MiB, s1));
    CU(cuCtxSynchronize()); double t3 = now();
    std::printf("SM copy %3d blocks: D->H %5.1f GB/s  H->D %5.1f GB/s  (CE D->H %5.1f)\n", blocks, 4.0 * 1.0737 / (t1 - t0), 4.0 * 1.0737 / (t2 - t1), 4.0 * 1.0737 / (t3 - t2));
  }
  for (const Busy& b : cases) {
    double t_access = 0, t_map = 0, t_side = 0, t_unmap = 0;
    const int reps = 8;
    for (int rep = 0; rep < reps; ++rep) {
      CU(cuCtxSynchronize());
      const size_t total = 2048 * MiB;  // per direction
      for (size_t done = 0; b.kind && done < total; done += b.piece) {
        size_t off = done % (512 * MiB);
        if (b.kind == 1 || b.kind == 3) CU(cuMemcpyDtoDAsync(hv + off, dv + off, b.piece, s1));
        if (b.kind == 2 || b.kind == 3) CU(cuMemcpyDtoDAsync(dv2 + off, hv2 + off, b.piece, s2));
        if (b.kind == 4) { CU(cuMemcpyDtoDAsync(hv + off, dv + off, b.piece, l1)); CU(cuMemcpyDtoDAsync(dv2 + off, hv2 + off, b.piece, l2)); }
        if (b.kind == 5) { CU(cuMemcpyDtoHAsync((char*)pin + off, dv + off, b.piece, s1)); CU(cuMemcpyHtoDAsync(dv2 + off, (char*)pin + off, b.piece, s2)); }
        if (b.kind == 6) CU(cuMemcpyDtoDAsync(dv2 + off, dv + off, b.piece, s1));
        if (b.kind == 7 || b.kind == 8 || b.kind == 9) kcopy<<<b.kind == 7 ? 16 : 132, 1024, 0, (cudaStream_t)s1>>>((int4*)(hv + off), (const int4*)(dv + off), b.piece / 16);
        if (b.kind == 9) kcopy<<<132, 1024, 0, (cudaStream_t)s2>>>((int4*)(dv2 + off), (const int4*)(hv2 + off), b.piece / 16);
      }
      CUmemGenericAllocationHandle h[2];
      for (auto& x : h) CU(cuMemCreate(&x, kChunk, &pd, 0));
      CUdeviceptr v = pool + next; next = (next + 2 * kChunk) % kPool;
      double t0 = now();
      for (int i = 0; i < 2; ++i) CU(cuMemMap(v + i * kChunk, kChunk, 0, h[i], 0));
      double t1 = now();
      if (access(v, 2 * kChunk)) return 1;
      double t2 = now();
      CUdeviceptr side; CU(cuMemAddressReserve(&side, kChunk, 0, 0, 0)); CU(cuMemMap(side, kChunk, 0, h[0], 0));
      double t3 = now();
      if (access(side, kChunk)) return 1;
      double t4 = now();
      for (int i = 0; i < 2; ++i) CU(cuMemUnmap(v + i * kChunk, kChunk));
      double t5 = now();
      t_map += t1 - t0; t_access += t2 - t1; t_side += t4 - t3; t_unmap += t5 - t4;
      CU(cuCtxSynchronize());
      CU(cuMemUnmap(side, kChunk)); CU(cuMemAddressFree(side, kChunk));
      for (auto x : h) CU(cuMemRelease(x));
    }
    std::printf("%-30s map %5.2f access(pool,128M) %5.2f access(side,64M) %5.2f unmap %5.2f ms\n", b.name, t_map / reps * 1e3,
                t_access / reps * 1e3, t_side / reps * 1e3, t_unmap / reps * 1e3);
  }
  return 0;
}
