// Placement plumbing over the stand-in driver (linked with -lcuda). Run with GPUMEMSHIM_POLICY=spill,
// GPUMEMSHIM_DEVICE_LIMIT=8M and a managed cap. Checks, through the stand-in's call counts and call
// order, what reaches the driver:
// - an allocation past the budget becomes managed memory advised to live on the host;
// - a launch that references it prefetches it once it fits the budget;
// - during a stream capture nothing of the shim's goes into the graph: cuMemAllocAsync gets device
//   memory within the budget and managed memory made outside the graph beyond it, a launch issues
//   no prefetch;
// - cuMemFreeAsync of spilled memory waits for the stream and frees with cuMemFree; inside a capture
//   it neither synchronises the capturing stream nor frees the memory the graph may still use;
// - a stream-ordered allocation on a thread with no current context is the program's own.
// The runner checks the shim's statistics.
#include "common.h"

namespace {

using preload::launch_fill;

constexpr size_t MiB = 1u << 20;

using Count = preload::CallCount;
// Position of the stand-in driver's latest call of `s`: call order.
unsigned long last(const char* s) { return fake_cuda_last_call(s); }

}  // namespace

int main() {
  preload::use_device0();
  CHECK(preload::declare_fill() == 0);
  CUstream st;
  CK(cuStreamCreate(&st, 0));

  // 6 MiB on the device, then 4 MiB: past the 8 MiB budget, so managed, advised to the host.
  CUdeviceptr a = 0, b = 0;
  CK(cuMemAlloc(&a, 6 * MiB));
  {
    Count managed("cuMemAllocManaged"), advise("cuMemAdvise_v2");
    CK(cuMemAlloc(&b, 4 * MiB));
    CHECK(managed.added() == 1);
    CHECK(advise.added() == 2);  // preferred location host, accessed by the device
  }
  // While the 6 MiB hold the budget, 4 MiB do not fit: the launch leaves b where it is.
  {
    Count prefetch("cuMemPrefetchAsync_v2");
    CK(launch_fill(b, 4 * MiB, st));
    CHECK(prefetch.added() == 0);
  }
  CK(cuMemFree(a));
  {
    Count prefetch("cuMemPrefetchAsync_v2");
    CK(launch_fill(b, 4 * MiB, st));
    CHECK(prefetch.added() == 1);  // now it fits: to the device before the kernel
    CHECK(last("cuMemPrefetchAsync_v2") < last("cuLaunchKernel"));
  }

  // A capture on st: nothing of the shim's may go into the graph.
  fake_cuda_set_capturing(st, 1);
  {
    Count managed("cuMemAllocManaged"), prefetch("cuMemPrefetchAsync_v2"), async("cuMemAllocAsync");
    // Past the budget: managed memory made outside the graph (no memory node), as spill promises;
    // the graph's free of it leaves it to the replays.
    CUdeviceptr c = 0;
    CK(cuMemAllocAsync(&c, 16 * MiB, st));
    CHECK(managed.added() == 1);
    CHECK(async.added() == 0);
    {
      Count free("cuMemFree_v2"), free_async("cuMemFreeAsync"), sync("cuStreamSynchronize");
      CK(cuMemFreeAsync(c, st));
      CHECK(free.added() == 0 && free_async.added() == 0 && sync.added() == 0);
    }
    // Within it: the graph gets the device memory it asked for.
    CK(cuMemAllocAsync(&c, 2 * MiB, st));
    CHECK(async.added() == 1);
    CK(launch_fill(b, 4 * MiB, st));
    CHECK(prefetch.added() == 0);
    CK(cuMemFreeAsync(c, st));
  }
  // Spilled memory freed inside the capture: no synchronisation of the capturing stream (that would
  // end the capture), and the memory stays for the graph.
  {
    Count sync("cuStreamSynchronize"), free("cuMemFree_v2"), free_async("cuMemFreeAsync");
    CK(cuMemFreeAsync(b, st));
    CHECK(sync.added() == 0);
    CHECK(free.added() == 0);
    CHECK(free_async.added() == 0);
  }
  fake_cuda_set_capturing(st, 0);

  // Outside a capture: spilled memory freed on a stream waits for that stream, then cuMemFree.
  CUdeviceptr e = 0, f = 0;
  CK(cuMemAlloc(&e, 6 * MiB));
  {
    Count managed("cuMemAllocManaged");
    CK(cuMemAllocAsync(&f, 4 * MiB, st));  // past the budget again: managed, stream-ordered or not
    CHECK(managed.added() == 1);
  }
  CK(launch_fill(f, 4 * MiB, st));
  {
    Count sync("cuStreamSynchronize"), free("cuMemFree_v2"), free_async("cuMemFreeAsync");
    CK(cuMemFreeAsync(f, st));
    CHECK(sync.added() == 1);
    CHECK(free.added() == 1);
    CHECK(free_async.added() == 0);  // managed memory is not the stream-ordered allocator's
    CHECK(last("cuStreamSynchronize") < last("cuMemFree_v2"));
  }
  // A thread with no current context (PyTorch's autograd thread makes its first stream-ordered
  // allocation so): no budget to check it against and no context for managed memory, so it is the
  // program's own allocation, even past the budget, not a refusal.
  {
    Count managed("cuMemAllocManaged"), async("cuMemAllocAsync"), free_async("cuMemFreeAsync");
    std::thread t([st] {
      CUdeviceptr g = 0;
      CK(cuMemAllocAsync(&g, 16 * MiB, st));
      CK(cuMemFreeAsync(g, st));
    });
    t.join();
    CHECK(managed.added() == 0);
    CHECK(async.added() == 1);
    CHECK(free_async.added() == 1);
  }
  CK(cuMemFree(e));
  CK(cuStreamDestroy(st));
  std::printf("placement ok\n");
  return 0;
}
