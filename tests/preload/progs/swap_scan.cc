// Movable memory under GPUMEMSHIM_SWAP_ORDER=scan over the stand-in driver (run with
// GPUMEMSHIM_POLICY=swap, GPUMEMSHIM_SWAP_PARK=on, GPUMEMSHIM_DEVICE_LIMIT=8M and a managed cap).
// Checks that moves wait for what the launch scan saw, not for the context, and that every byte
// survives:
// - each launch, copy or memset that uses movable memory is marked with an event after it;
// - a move waits for the marks of the ranges it moves (on every stream that used them), copies on
//   the shim's own streams between side ranges, remaps without waiting for the copies, and the
//   launch waits for them on the GPU; device memory evicted is spare after its copy out;
// - evicted chunks are parked (their host copy not mapped in the program's range) until a use the
//   shim sees, or work it cannot see (a 2D copy), needs them mapped; a launch that uses more than
//   the budget holds maps a parked range where it is and uses it there;
// - a round of moves after a copy whose ends the hooks do not name (2D) waits for the context once;
// - a new chunk is mapped before the evictions that make its room start copying, unless the card is
//   full: then after them;
// - copies out wait on the GPU for a gate that the shim shuts around its access calls.
#include <algorithm>

#include "swap_common.h"

using namespace swap_test;

namespace {

// A 2D copy of one row inside x: the hooks do not scan 2D copies.
void copy_2d(CUdeviceptr x) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = x;
  c.dstDevice = x + 1024;
  c.WidthInBytes = 512;
  c.Height = 1;
  CK(cuMemcpy2D(&c));
}

// x[i] += 1, y[i] += 1, z[i] += 1; params: three CUdeviceptr, size_t count
void k_inc3(void** p) {
  for (int k = 0; k < 3; ++k) {
    uint32_t* x = preload::dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[k]));
    size_t n = *static_cast<size_t*>(p[3]);
    for (size_t i = 0; i < n; ++i) x[i] += 1;
  }
}

CUresult inc3(CUdeviceptr x, CUdeviceptr y, CUdeviceptr z, CUstream s) {
  size_t n = kWords;
  void* params[] = {&x, &y, &z, &n};
  return cuLaunchKernel(preload::as_function(k_inc3), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

}  // namespace

int main() {
  preload::use_device0();
  declare_kernels();
  {
    size_t sizes[] = {sizeof(CUdeviceptr), sizeof(CUdeviceptr), sizeof(CUdeviceptr), sizeof(size_t)};
    CHECK(fake_cuda_set_kernel_params(preload::as_function(k_inc3), sizes, 4) == 0);
  }
  CUstream st, st2;
  CK(cuStreamCreate(&st, 0));
  CK(cuStreamCreate(&st2, 0));

  CUdeviceptr a = 0, b = 0, c = 0;
  CK(cuMemAlloc(&a, 4 * MiB));
  CK(cuMemAlloc(&b, 4 * MiB));
  put(a, 1);  // copies: marked on the legacy stream (the moves below wait for the marks)
  put(b, 2);
  {
    Count record("cuEventRecord");
    CK(inc(a, st));  // on two streams: a move of a waits for both
    CK(inc(a, st2));
    CHECK(record.added() == 2);
    CHECK(last("cuLaunchKernel") < last("cuEventRecord"));
  }
  {
    // Over the budget, b (the least recently used) goes out after its copy's mark. c is mapped
    // before that copy out starts (mapping calls slow down while copies to the host run). b's
    // range is unmapped while the copy out (from a side range) runs, and its host copy is not
    // mapped there (parked); its device memory is neither released nor reused before the copy is
    // over. The copy out waits on the GPU for the gate the shim shuts while it maps (one piece).
    Count sync("cuCtxSynchronize"), streams("cuStreamCreate"), esync("cuEventSynchronize"), release("cuMemRelease"),
        map("cuMemMap"), gate("cuStreamWaitValue32_v2");
    CK(cuMemAlloc(&c, 4 * MiB));
    CHECK(gate.added() == 1 && last("cuStreamWaitValue32_v2") < last("cuMemcpyDtoDAsync_v2"));
    // Side ranges for b's new host copy and for its device memory, then c: nothing at b's range.
    CHECK(map.added() == 3);
    CHECK(sync.added() == 0);
    CHECK(esync.added() == 1);
    CHECK(last("cuEventSynchronize") < last("cuMemcpyDtoDAsync_v2"));
    CHECK(last("cuMemcpyDtoDAsync_v2") < last("cuMemUnmap"));
    CHECK(last("cuMemSetAccess") < last("cuMemcpyDtoDAsync_v2"));
    CHECK(release.added() == 0);
    CHECK(streams.added() == 2);  // the shim's streams for copies out and in
  }
  put(c, 3);
  CK(inc(c, st));  // resident: no move
  {
    // b comes in and a (least recently used) goes out; a 2D copy since the last round makes this
    // one wait for the context, once.
    Count map("cuMemMap");
    copy_2d(c);  // which might reach b, for all the shim knows: b's host copy is mapped first
    CHECK(map.added() == 1);
    Count sync("cuCtxSynchronize");
    CK(inc(b, st));
    CHECK(sync.added() == 1);
  }
  put(c, 3);  // undo the 2D copy
  {
    // a comes back for a launch on st2 and b (used before c's copy) goes out. No context
    // synchronisation, and no host wait for the copies: the host waits for the marks of a and b,
    // the launch for the copies on the GPU, which have not finished.
    fake_cuda_set_events_busy(1);
    Count sync("cuCtxSynchronize"), esync("cuEventSynchronize"), ssync("cuStreamSynchronize"),
        wait("cuStreamWaitEvent"), create("cuMemCreate"), access("cuMemSetAccess");
    const unsigned long gated = fake_cuda_access_calls_gated();
    CK(inc(a, st2));
    // Every access call with the gate shut (a's range over its device memory, at least).
    CHECK(access.added() >= 1 && fake_cuda_access_calls_gated() - gated == access.added());
    fake_cuda_set_events_busy(0);
    CHECK(sync.added() == 0);
    // The marks of a (copy, st, st2) and b (copy, st), and the check of b: its copy out goes to
    // the host copy it kept, so nothing waits for another round's copy in to free one.
    CHECK(esync.added() == 5 + 1);
    CHECK(ssync.added() == 0);
    CHECK(last("cuEventSynchronize") < last("cuMemUnmap"));
    CHECK(last("cuMemUnmap") < last("cuMemcpyDtoDAsync_v2"));  // the copy in, after the remaps
    // a's copy in takes the device memory a's own copy out left spare (its copy is over), not b's:
    // it waits for no copy out. On the GPU: the check of b, which kept its host copy when it came
    // in (act/swap/sums.h), after b's copy in; the end of the round after the copies out; the
    // launch after the end of the round.
    CHECK(create.added() == 0);
    CHECK(wait.added() == 3);
    CHECK(last("cuMemcpyDtoDAsync_v2") < last("cuStreamWaitEvent"));
    CHECK(last("cuStreamWaitEvent") < last("cuLaunchKernel"));
  }
  {
    // A copy out of a host-backed range (b) brings it in first, like a launch would (c goes out),
    // and the copy waits for the copy in on the GPU.
    fake_cuda_set_events_busy(1);
    Count sync("cuCtxSynchronize"), wait("cuStreamWaitEvent");
    CHECK(holds(b, 2, 1));
    fake_cuda_set_events_busy(0);
    CHECK(sync.added() == 0);
    // b's copy in takes the device memory b's copy out left, not c's. That copy's batch reads busy,
    // and nothing waited for it on the host: c's copy out takes new host memory rather than wait
    // for copies in that hold none (b kept its host copy). So on the GPU: b's copy in after that
    // batch, the end of the round after the copies out, the program's copy after the round.
    CHECK(wait.added() == 3);
    // The copy itself: the driver's, or the shim's staged one.
    CHECK(last("cuStreamWaitEvent") < std::max(last("cuMemcpyDtoH_v2"), last("cuMemcpyDtoHAsync_v2")));
  }
  CHECK(holds(a, 1, 3));
  CHECK(holds(c, 3, 0));
  {
    // A memset is planned and marked too.
    Count record("cuEventRecord");
    CK(cuMemsetD32Async(b, 7, 16, st));
    CHECK(record.added() >= 1);  // and those of the moves that bring b in
    CHECK(last("cuMemsetD32Async") < last("cuEventRecord"));
    CK(inc(b, st));
  }
  {
    std::vector<uint32_t> v(16);
    CK(cuMemcpyDtoH(v.data(), b, 64));
    for (uint32_t w : v) CHECK(w == 8);
  }
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  CK(cuMemFree(c));
  {
    // A launch that uses more than the budget holds (three ranges of 4 MiB in 8): the two on the
    // device stay; the parked one is not brought in but mapped where it is, and the kernel reads
    // and writes it there. New ranges: no history of moves (no ping-pong stop).
    CUdeviceptr d = 0, e = 0, f = 0;
    CK(cuMemAlloc(&d, 4 * MiB));
    CK(cuMemAlloc(&e, 4 * MiB));
    put(d, 4);
    put(e, 5);
    CK(cuMemAlloc(&f, 4 * MiB));  // d, the least recently used, goes out: parked
    put(f, 6);
    Count map("cuMemMap"), unmap("cuMemUnmap");
    CK(inc3(d, e, f, st));
    CHECK(map.added() == 1);    // d's host copy, at d
    CHECK(unmap.added() == 0);  // nothing moved
    CHECK(holds(d, 4, 1) && holds(e, 5, 1) && holds(f, 6, 1));
    CK(cuMemFree(d));
    CK(cuMemFree(e));
    CK(cuMemFree(f));
  }
  {
    // The evictions that make room for a new chunk go first, and the new chunk takes the device
    // memory they leave while their copies out still read it: no memory is made beyond the budget
    // (on a card fuller than the budget says, making it would fail), and the chunk's uses wait on
    // the GPU for the copies (its ready mark, recorded on the shim's stream after them).
    CUdeviceptr g = 0, h = 0, k = 0;
    CK(cuMemAlloc(&g, 4 * MiB));
    CK(cuMemAlloc(&h, 4 * MiB));
    put(g, 7);
    put(h, 8);
    fake_cuda_fail_device_creates(1);
    Count copies("cuMemcpyDtoDAsync_v2");
    CK(cuMemAlloc(&k, 4 * MiB));  // g, the least recently used, goes out
    CHECK(copies.added() == 1);
    CHECK(last("cuMemCreate") < last("cuMemcpyDtoDAsync_v2"));  // nothing made after the copy out
    CHECK(last("cuMemcpyDtoDAsync_v2") < last("cuMemSetAccess"));
    CHECK(last("cuMemcpyDtoDAsync_v2") < last("cuStreamWaitEvent") && last("cuStreamWaitEvent") < last("cuEventRecord"));
    fake_cuda_fail_device_creates(0);
    put(k, 9);
    CHECK(holds(g, 7, 0) && holds(h, 8, 0) && holds(k, 9, 0));
    CK(cuMemFree(g));
    CK(cuMemFree(h));
    CK(cuMemFree(k));
  }
  CK(cuStreamDestroy(st));
  CK(cuStreamDestroy(st2));
  std::printf("swap scan ok\n");
  return 0;
}
