// Policy auto, the default, over the stand-in driver. Run with no GPUMEMSHIM_POLICY,
// GPUMEMSHIM_DEVICE_LIMIT=16M, GPUMEMSHIM_SWAP_CHUNK=4M and a managed cap. Checks, through the
// stand-in's call counts, what reaches the driver:
// - an allocation of the minimum size up to a quarter of the budget is movable memory (VMM);
// - one over a quarter that fits beside what is there is ordinary device memory;
// - one over a quarter that does not fit is managed memory, and a launch that uses it while the
//   budget is full of other memory leaves it where it is (no prefetch, nothing evicted for it);
// - a stream capture's allocation past the budget gets device memory, not out-of-memory;
// - one over a quarter that does not fit, made again at the size of one freed before, is spilled
//   again if launches used the freed one once, movable if they used it eight times or more
//   (graph launches, which no scan sees, count as uses of every large allocation);
// - a legacy IPC handle is refused for movable memory as the driver refuses it (the runner checks
//   the one warning that says what to run instead) and given for ordinary memory.
// Every byte written through a kernel is checked after. The runner checks the shim's statistics.
#include <vector>

#include "common.h"

namespace {

using preload::launch_fill;

constexpr size_t MiB = 1u << 20;

using Count = preload::CallCount;

bool sevens(CUdeviceptr x, size_t n) {
  std::vector<unsigned char> h(n);
  if (cuMemcpyDtoH(h.data(), x, n) != CUDA_SUCCESS) return false;
  for (unsigned char c : h) {
    if (c != 7) return false;
  }
  return true;
}

}  // namespace

int main() {
  preload::use_device0();
  CHECK(preload::declare_fill() == 0);
  CUstream st;
  CK(cuStreamCreate(&st, 0));

  CUdeviceptr small = 0, large = 0, huge = 0;
  {
    Count create("cuMemCreate"), alloc("cuMemAlloc_v2");
    CK(cuMemAlloc(&small, 4 * MiB));  // a quarter of the budget exactly: movable
    CHECK(create.added() >= 1);
    CHECK(alloc.added() == 0);
  }
  {
    Count create("cuMemCreate"), alloc("cuMemAlloc_v2");
    CK(cuMemAlloc(&large, 6 * MiB));  // over a quarter; 4 + 6 fit in 16: ordinary memory
    CHECK(alloc.added() == 1);
    CHECK(create.added() == 0);
  }
  {
    Count managed("cuMemAllocManaged"), alloc("cuMemAlloc_v2");
    CK(cuMemAlloc(&huge, 8 * MiB));  // 4 + 6 + 8 do not fit: spilled, streamed
    CHECK(managed.added() == 1);
    CHECK(alloc.added() == 0);
  }
  CK(launch_fill(small, 4 * MiB, st));
  CK(launch_fill(large, 6 * MiB, st));
  {
    // 6 MiB left: the 8 MiB region is read where it lies; nothing is evicted to bring it in.
    Count prefetch("cuMemPrefetchAsync_v2"), unmap("cuMemUnmap");
    CK(launch_fill(huge, 8 * MiB, st));
    CHECK(prefetch.added() == 0);
    CHECK(unmap.added() == 0);
  }
  // Legacy IPC: the driver's answer for each kind of memory (movable memory has no such handle).
  CUipcMemHandle h;
  CHECK_RESULT(cuIpcGetMemHandle(&h, small), CUDA_ERROR_INVALID_VALUE);
  CHECK_RESULT(cuIpcGetMemHandle(&h, small), CUDA_ERROR_INVALID_VALUE);
  CK(cuIpcGetMemHandle(&h, large));

  CK(cuStreamSynchronize(st));
  CHECK(sevens(small, 4 * MiB));
  CHECK(sevens(large, 6 * MiB));
  CHECK(sevens(huge, 8 * MiB));

  // A capture: nothing moves while it lasts, so its memory goes past the budget rather than fail.
  fake_cuda_set_capturing(st, 1);
  {
    Count async("cuMemAllocAsync"), managed("cuMemAllocManaged");
    CUdeviceptr c = 0;
    CK(cuMemAllocAsync(&c, 12 * MiB, st));
    CHECK(async.added() == 1);
    CHECK(managed.added() == 0);
    CK(cuMemFreeAsync(c, st));
  }
  fake_cuda_set_capturing(st, 0);

  // Made again at the size of one freed before that one launch used: streamed, spilled again.
  CK(cuMemFree(huge));
  {
    Count managed("cuMemAllocManaged");
    CK(cuMemAlloc(&huge, 8 * MiB));
    CHECK(managed.added() == 1);
  }
  // Made again after eight launches used it: a step's working memory (XLA's temporaries of a
  // jitted step), movable rather than read over the link.
  for (int i = 0; i < 8; ++i) CK(launch_fill(huge, 8 * MiB, st));
  CK(cuMemFree(huge));
  {
    Count managed("cuMemAllocManaged"), alloc("cuMemAlloc_v2");
    CK(cuMemAlloc(&huge, 8 * MiB));
    CHECK(managed.added() == 0);
    CHECK(alloc.added() == 0);
  }
  CK(launch_fill(huge, 8 * MiB, st));
  CK(cuStreamSynchronize(st));
  CHECK(sevens(huge, 8 * MiB));
  // Work no scan sees (graph launches: XLA's command buffers) counts as uses too.
  CUdeviceptr work = 0;
  {
    Count managed("cuMemAllocManaged");
    CK(cuMemAlloc(&work, 10 * MiB));
    CHECK(managed.added() == 1);
  }
  CUgraphExec graph = reinterpret_cast<CUgraphExec>(&work);  // the stand-in takes any handle
  for (int i = 0; i < 8; ++i) CK(cuGraphLaunch(graph, st));
  CK(cuMemFree(work));
  {
    Count managed("cuMemAllocManaged");
    CK(cuMemAlloc(&work, 10 * MiB));
    CHECK(managed.added() == 0);
  }
  CK(cuMemFree(work));
  CK(cuMemFree(huge));
  CK(cuMemFree(large));
  CK(cuMemFree(small));
  CK(cuStreamDestroy(st));
  std::printf("auto ok\n");
  return 0;
}
