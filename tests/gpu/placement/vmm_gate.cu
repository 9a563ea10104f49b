// The gate policy swap puts on its copies to the host (shim/act/swap.cc, copy_out): 2 GiB of copies
// from device to host memory in pieces, each behind cuStreamWaitValue32 on a host word, and
// cuMemSetAccess over 128 MiB of fresh device memory while they run, with the word at 0 (open)
// or 1 (shut, optionally after a spin that lets the piece in flight finish). Also the bandwidth of
// gated against plain copies by piece size. On the H100 (2026-11-22): access 0.11 ms idle, 1.43
// under plain copies, 1.84 under open gated ones, 0.21 to 0.33 with the gate shut; gated copies
// in 8 MiB pieces 53.7 GB/s against 54.5 plain (2 MiB: 49.7 against 52.2).
// Build: nvcc -O2 -arch=sm_90 vmm_gate.cu -lcuda
#include <cuda.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include "vmm_probe.h"
int main() {
  CU(cuInit(0)); CUdevice dev; CU(cuDeviceGet(&dev, 0)); CUcontext ctx; CU(cuDevicePrimaryCtxRetain(&ctx, dev)); CU(cuCtxSetCurrent(ctx));
  int can = 0; CU(cuDeviceGetAttribute(&can, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev));
  std::printf("wait value nor: %d\n", can);
  CUstream s1; CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CUdeviceptr pool; const size_t kPool = 64 * kChunk; CU(cuMemAddressReserve(&pool, kPool, kChunk, 0, 0));
  size_t next = 0;
  CUdeviceptr dv, hv; if (vmm(&dv, 512 * MiB, false) || vmm(&hv, 512 * MiB, true)) return 1;
  volatile unsigned* flag; CU(cuMemHostAlloc((void**)&flag, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  CUdeviceptr dflag; CU(cuMemHostGetDevicePointer(&dflag, (void*)flag, 0));
  *flag = 0;
  CUmemAllocationProp pd = prop_of(false);
  const size_t total = 2048 * MiB;
  // throughput of gated vs plain copies
  for (size_t piece : {2 * MiB, 8 * MiB, 32 * MiB, 64 * MiB}) {
    for (int gated = 0; gated < 2; ++gated) {
      CU(cuCtxSynchronize()); double t0 = now();
      for (size_t done = 0; done < total; done += piece) {
        if (gated) CU(cuStreamWaitValue32(s1, dflag, 0, CU_STREAM_WAIT_VALUE_EQ));
        CU(cuMemcpyDtoDAsync(hv + done % (512 * MiB), dv + done % (512 * MiB), piece, s1));
      }
      double tq = now();
      CU(cuCtxSynchronize()); double t1 = now();
      std::printf("piece %3zu MiB gated %d: D->H %5.1f GB/s (queueing %.2f ms)\n", piece / MiB, gated, total / 1e9 / (t1 - t0), (tq - t0) * 1e3);
    }
  }
  // setAccess under copies: plain, gate closed, gate closed + spin
  struct Case { const char* name; int gated; int close; double spin_us; size_t piece; };
  Case cases[] = {{"idle", 0, 0, 0, 0}, {"plain 8M", 0, 0, 0, 8 * MiB}, {"gated 8M open", 1, 0, 0, 8 * MiB},
                  {"gated 8M closed", 1, 1, 0, 8 * MiB}, {"gated 8M closed+200us", 1, 1, 200, 8 * MiB},
                  {"gated 2M closed", 1, 1, 0, 2 * MiB}, {"gated 2M closed+60us", 1, 1, 60, 2 * MiB},
                  {"gated 32M closed", 1, 1, 0, 32 * MiB}, {"gated 32M closed+700us", 1, 1, 700, 32 * MiB}};
  for (const Case& c : cases) {
    double t_access = 0, t_map = 0, t_stall = 0; const int reps = 8;
    for (int rep = 0; rep < reps; ++rep) {
      CU(cuCtxSynchronize());
      *flag = 0;
      for (size_t done = 0; c.piece && done < total; done += c.piece) {
        if (c.gated) CU(cuStreamWaitValue32(s1, dflag, 0, CU_STREAM_WAIT_VALUE_EQ));
        CU(cuMemcpyDtoDAsync(hv + done % (512 * MiB), dv + done % (512 * MiB), c.piece, s1));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      CUmemGenericAllocationHandle h[2];
      for (auto& x : h) CU(cuMemCreate(&x, kChunk, &pd, 0));
      CUdeviceptr v = pool + next; next = (next + 2 * kChunk) % kPool;
      double ts = now();
      if (c.close) { *flag = 1; std::atomic_thread_fence(std::memory_order_seq_cst); }
      if (c.spin_us > 0) { while (now() - ts < c.spin_us * 1e-6) {} }
      double t0 = now();
      for (int i = 0; i < 2; ++i) CU(cuMemMap(v + i * kChunk, kChunk, 0, h[i], 0));
      double t1 = now();
      if (access(v, 2 * kChunk)) return 1;
      double t2 = now();
      if (c.close) { *flag = 0; std::atomic_thread_fence(std::memory_order_seq_cst); }
      t_map += t1 - t0; t_access += t2 - t1; t_stall += t2 - ts;
      CU(cuCtxSynchronize());
      for (int i = 0; i < 2; ++i) CU(cuMemUnmap(v + i * kChunk, kChunk));
      for (auto x : h) CU(cuMemRelease(x));
    }
    std::printf("%-26s map %5.2f access(128M) %5.2f  closed-to-open %5.2f ms\n", c.name, t_map / reps * 1e3, t_access / reps * 1e3, t_stall / reps * 1e3);
  }
  return 0;
}
