// Stream-ordered allocations from a memory pool under a device budget, over the stand-in driver:
// cuMemAllocFromPoolAsync on the device's default pool and cuMemAllocAsync obey the budget like any
// allocation. Run with GPUMEMSHIM_DEVICE_LIMIT=8M and a managed cap of 64M; argv[1] is the policy
// the runner set (last on the command line). Checks:
// - 6 MiB from the pool within the budget is the pool's own memory (one call reaches the driver);
// - 6 MiB more from the pool is past the budget: managed memory under spill and auto (no call of
//   the pool's reaches the driver), out of memory under off, as a card of that size would say;
// - every byte written to each reads back, and each is freed with the call that matches it.
#include <cstring>
#include <vector>

#include "common.h"

namespace {

constexpr size_t MiB = 1u << 20;

void fill_and_check(CUdeviceptr p, size_t n, unsigned char v) {
  CK(cuMemsetD8(p, v, n));
  std::vector<unsigned char> back(n);
  CK(cuMemcpyDtoH(back.data(), p, n));
  for (unsigned char b : back) CHECK(b == v);
}

}  // namespace

int main(int argc, char** argv) {
  const char* policy = argv[argc - 1];
  const bool off = std::strcmp(policy, "off") == 0;
  preload::use_device0();
  CUdevice dev = 0;
  CK(cuCtxGetDevice(&dev));
  CUmemoryPool pool = nullptr;
  CK(cuDeviceGetDefaultMemPool(&pool, dev));
  CUstream st = nullptr;
  CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

  preload::CallCount from_pool("cuMemAllocFromPoolAsync"), managed("cuMemAllocManaged");
  CUdeviceptr a = 0, b = 0;
  CK(cuMemAllocFromPoolAsync(&a, 6 * MiB, pool, st));
  CHECK(from_pool.added() == 1);
  fill_and_check(a, 6 * MiB, 1);
  CUresult r = cuMemAllocFromPoolAsync(&b, 6 * MiB, pool, st);
  if (off) {
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
  } else {
    CK(r);
    CHECK(from_pool.added() == 1);
    CHECK(managed.added() == 1);
    fill_and_check(b, 6 * MiB, 2);
    fill_and_check(a, 6 * MiB, 3);
    preload::CallCount free_async("cuMemFreeAsync"), free("cuMemFree_v2");
    CK(cuMemFreeAsync(b, st));
    CHECK(free_async.added() == 0 && free.added() == 1);
  }
  {
    preload::CallCount free_async("cuMemFreeAsync");
    CK(cuMemFreeAsync(a, st));
    CHECK(free_async.added() == 1);
  }
  CK(cuStreamSynchronize(st));
  CK(cuStreamDestroy(st));
  std::printf("pools ok (%s)\n", policy);
  return 0;
}
