// Movable memory (GPUMEMSHIM_POLICY=swap) over the stand-in driver, whose virtual memory calls map
// real shared memory, so a remap that lost data would show. Run with GPUMEMSHIM_DEVICE_LIMIT=8M,
// GPUMEMSHIM_SWAP_CHUNK=4M and a managed cap. Checks what reaches the driver and that every byte
// survives the moves:
// - an allocation lies in chunks of a reserved slab backed by device memory (cuMemCreate,
//   cuMemMap); past the budget the least recently used chunk is evicted to make room; never
//   cuMemAlloc or managed memory;
// - a launch that references a host-backed range brings it in and evicts the least recently used
//   range, together: one context synchronisation before the copies and remaps, each chunk's copy
//   out waited for (an event) just before its remap, and the evicted device memory backs the range
//   brought in;
// - a kernel reads and writes the range wherever it is;
// - a stream-ordered free waits for nothing, and the next allocation gets the space back:
//   stream-ordered after a GPU-side wait for the free, and through a plain allocation after a
//   host-side wait;
// - freeing the last allocation unmaps and releases everything;
// - freed space is handed out for any allocations that fit in it, with no mapping;
// - an allocation of several chunks is mapped with one access call;
// - the device memory of a freed chunk given back for room backs the next new chunk.
// The runner checks the shim's statistics.
#include <thread>

#include "swap_common.h"

using namespace swap_test;

int main() {
  preload::use_device0();
  declare_kernels();
  CUstream st, st2;
  CK(cuStreamCreate(&st, 0));
  CK(cuStreamCreate(&st2, 0));

  CUdeviceptr a = 0, b = 0, c = 0;
  {
    Count create("cuMemCreate"), alloc("cuMemAlloc_v2"), managed("cuMemAllocManaged");
    CK(cuMemAlloc(&a, 4 * MiB));
    CK(cuMemAlloc(&b, 4 * MiB));
    CHECK(create.added() == 2);  // one device chunk each, within the 8 MiB
    put(a, 1);
    Count sync("cuCtxSynchronize"), unmap("cuMemUnmap"), release("cuMemRelease"), gate("cuStreamWaitValue32_v2");
    CK(cuMemAlloc(&c, 4 * MiB));
    // The host waits for the copy out right after the remaps: the copy goes ungated (swap_scan.cc).
    CHECK(gate.added() == 0);
    // Past the budget: a, the older, goes to a new host chunk first, then c takes a's device memory
    // (its copy is over when the round returns): nothing released, no device memory made.
    CHECK(create.added() == 3);
    CHECK(release.added() == 0);
    CHECK(sync.added() == 1 && unmap.added() == 1);  // a's range
    // Everything queued is done before the copy out (a kernel on another stream may still have been
    // writing a). The copy reads the side range, so a's range is remapped while it runs; c maps
    // a's device memory after it.
    CHECK(last("cuCtxSynchronize") < last("cuMemcpyDtoDAsync_v2"));
    CHECK(last("cuMemcpyDtoDAsync_v2") < last("cuStreamSynchronize"));
    CHECK(last("cuStreamSynchronize") < last("cuMemMap"));
    CHECK(alloc.added() == 0);
    CHECK(managed.added() == 0);
  }
  CHECK(holds(a, 1, 0));
  put(a, 1);
  put(b, 2);
  put(c, 3);

  // a is on the host; the launch brings it in and b, the least recently used, goes out.
  {
    Count sync("cuCtxSynchronize"), unmap("cuMemUnmap"), create("cuMemCreate"), release("cuMemRelease");
    CK(inc(a, st));
    CHECK(sync.added() == 1);    // one for both moves, before the first remap
    CHECK(unmap.added() == 2);
    CHECK(create.added() == 1);  // a host chunk for b
    CHECK(release.added() == 0);  // b's device memory now backs a
    CHECK(last("cuCtxSynchronize") < last("cuMemUnmap"));
    CHECK(last("cuMemUnmap") < last("cuLaunchKernel"));
  }
  CHECK(holds(a, 1, 1));
  CHECK(holds(b, 2, 0));
  CHECK(holds(c, 3, 0));

  // b comes back (c goes: a was used since), keeps its data, and the kernel changes it.
  {
    Count create("cuMemCreate");
    CK(inc(b, st));
    CHECK(create.added() == 0);  // c takes the host chunk a left, b c's device memory
  }
  CK(inc(b, st));  // resident now: no move
  CHECK(holds(a, 1, 1));
  CHECK(holds(b, 2, 2));
  CHECK(holds(c, 3, 0));

  // Freed on a stream and allocated again: the same range, with no mapping and no waiting.
  CUdeviceptr d = 0, e = 0, f = 0;
  {
    Count create("cuMemCreate"), map("cuMemMap"), sync("cuCtxSynchronize"), ssync("cuStreamSynchronize"),
        wait("cuStreamWaitEvent"), esync("cuEventSynchronize"), record("cuEventRecord");
    CK(cuMemFreeAsync(b, st));
    CK(cuMemAllocAsync(&d, 4 * MiB, st));
    CHECK(d == b);
    // Even the same stream waits on the GPU: a handle does not always name one stream (the
    // per-thread default stream, a destroyed stream's handle given out again).
    CHECK(record.added() == 1 && wait.added() == 1 && esync.added() == 0);
    CK(cuMemFreeAsync(d, st));
    CK(cuMemAllocAsync(&e, 4 * MiB, st2));  // another stream waits for the free on the GPU
    CHECK(e == b);
    CHECK(wait.added() == 2 && esync.added() == 0);
    // The legacy default stream is one stream for good: used again there, no wait. On another, one.
    CK(cuMemFreeAsync(e, nullptr));
    CK(cuMemAllocAsync(&e, 4 * MiB, CU_STREAM_LEGACY));
    CHECK(e == b && wait.added() == 2);
    CK(cuMemFreeAsync(e, CU_STREAM_LEGACY));
    CK(cuMemAllocAsync(&e, 4 * MiB, st2));
    CHECK(e == b && wait.added() == 3 && esync.added() == 0);
    // A thread's per-thread default stream is its own: that thread alone uses the space unwaited.
    CK(cuMemFreeAsync(e, CU_STREAM_PER_THREAD));
    CK(cuMemAllocAsync(&e, 4 * MiB, CU_STREAM_PER_THREAD));
    CHECK(e == b && wait.added() == 3);
    CK(cuMemFreeAsync(e, CU_STREAM_PER_THREAD));
    std::thread([&] {
      preload::use_device0();
      CK(cuMemAllocAsync(&e, 4 * MiB, CU_STREAM_PER_THREAD));
    }).join();
    CHECK(e == b && wait.added() == 4 && esync.added() == 0);
    CK(cuMemFreeAsync(e, st2));
    CK(cuMemAlloc(&f, 4 * MiB));  // not stream-ordered: waits here
    CHECK(f == b);
    CHECK(esync.added() == 1);
    CHECK(create.added() == 0 && map.added() == 0);
    CHECK(sync.added() == 0 && ssync.added() == 0);
  }
  CK(inc(f, st));
  CHECK(holds(a, 1, 1));
  CHECK(holds(c, 3, 0));
  {
    Count unmap("cuMemUnmap"), release("cuMemRelease"), free_va("cuMemAddressFree");
    CK(cuMemFree(a));
    CK(cuMemFree(c));
    CHECK(unmap.added() == 0);  // kept for reuse
    CK(cuMemFree(f));
    // With the last, the three chunks (two on the device, c's on the host), the side ranges of
    // the two device chunks (both were copied), the two spare host chunks with their ranges, and
    // the slab.
    CHECK(unmap.added() == 3 + 2 + 2);
    CHECK(release.added() == 2 + 2);
    CHECK(free_va.added() == 1 + 2 + 2);
  }

  // Freed space goes to whatever fits in it: 6 MiB (two chunks, the older x evicted for room)
  // make room for 4 and then 2 MiB, with no mapping.
  {
    CUdeviceptr x = 0, y = 0, z = 0, w = 0;
    CK(cuMemAlloc(&x, 4 * MiB));  // something held, so that the freed space is kept
    put(x, 6);
    CK(cuMemAlloc(&y, 6 * MiB));
    CK(cuMemFree(y));
    Count create("cuMemCreate"), map("cuMemMap"), reserve("cuMemAddressReserve"), unmap("cuMemUnmap");
    CK(cuMemAlloc(&z, 4 * MiB));
    CHECK(z == y);
    CK(cuMemAlloc(&w, 2 * MiB));
    CHECK(w == y + 4 * MiB);  // the rest of y's second chunk
    CHECK(create.added() == 0 && map.added() == 0 && reserve.added() == 0 && unmap.added() == 0);
    put(z, 5);
    CHECK(holds(z, 5, 0));
    CHECK(holds(x, 6, 0));  // evicted for y, and still whole
    CK(cuMemFree(z));
    CK(cuMemFree(w));
    CK(cuMemFree(x));
  }

  // A freed chunk given back for room lends its device memory to the new chunk that needs it: it is
  // unmapped, not released, and no memory is made for it.
  {
    CUdeviceptr x = 0, y = 0, z = 0;
    CK(cuMemAlloc(&x, 4 * MiB));
    CK(cuMemAlloc(&y, 4 * MiB));
    put(y, 2);
    CK(cuMemFree(x));  // kept, mapped, for an allocation that fits in it
    Count create("cuMemCreate"), release("cuMemRelease");
    CK(cuMemAlloc(&z, 8 * MiB));  // two chunks, which x's does not neighbour: y goes out for room
    // In context order y goes out first (its copy is over when the round returns): z's two chunks
    // get x's device memory and y's, and only y's host chunk is made; nothing is released.
    CHECK(create.added() == 1);
    CHECK(release.added() == 0);
    put(z, 3);
    put(z + 4 * MiB, 4);
    CHECK(holds(y, 2, 0) && holds(z, 3, 0) && holds(z + 4 * MiB, 4, 0));
    CK(cuMemFree(y));
    CK(cuMemFree(z));
  }

  // An allocation of many chunks (33 of 4 MiB), too large for the budget: host chunks, each mapped,
  // with one call giving the device access to all of them (the driver charges per call).
  {
    Count create("cuMemCreate"), map("cuMemMap"), access("cuMemSetAccess");
    CUdeviceptr big = 0;
    CK(cuMemAlloc(&big, 130 * MiB));
    // Each host chunk is mapped at a side range of its own, then into the program's slab.
    CHECK(create.added() == 33 && map.added() == 33 + 33);
    CHECK(access.added() == 33 + 1);  // the side ranges, then all of the program's memory at once
    put(big + 126 * MiB, 4);          // across the 32nd and 33rd chunks
    CHECK(holds(big + 126 * MiB, 4, 0));
    CK(cuMemFree(big));
  }
  CK(cuStreamDestroy(st));
  CK(cuStreamDestroy(st2));
  std::printf("swap ok\n");
  return 0;
}
