// Movable memory (GPUMEMSHIM_POLICY=swap) over the stand-in driver, whose virtual memory calls map
// real shared memory, so a remap that lost data would show. Run with GPUMEMSHIM_DEVICE_LIMIT=8M and a
// managed cap. Checks what reaches the driver and that every byte survives the moves:
// - within the budget an allocation is a reserved range backed by device memory (cuMemCreate,
//   cuMemMap), past it by host memory; never cuMemAlloc or managed memory;
// - a launch that references a host-backed range brings it in, evicting the least recently used
//   range first, each move after a context synchronisation;
// - a kernel reads and writes the range wherever it is;
// - freeing unmaps and releases everything.
// The runner checks the shim's statistics.
#include "common.h"

namespace {

constexpr size_t MiB = 1u << 20;
constexpr size_t kWords = 4 * MiB / sizeof(uint32_t);

using Count = preload::CallCount;
// Position of the stand-in driver's latest call of `s`: call order.
unsigned long last(const char* s) { return fake_cuda_last_call(s); }

// x[i] += 1; params: CUdeviceptr x, size_t count
void k_inc(void** p) {
  uint32_t* x = preload::dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0]));
  size_t n = *static_cast<size_t*>(p[1]);
  for (size_t i = 0; i < n; ++i) x[i] += 1;
}

CUresult inc(CUdeviceptr x, CUstream s) {
  size_t n = kWords;
  void* params[] = {&x, &n};
  return cuLaunchKernel(preload::as_function(k_inc), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

void put(CUdeviceptr x, uint32_t seed) {
  std::vector<uint32_t> v(kWords);
  for (size_t i = 0; i < kWords; ++i) v[i] = seed * 1000003u + static_cast<uint32_t>(i);
  CK(cuMemcpyHtoD(x, v.data(), 4 * MiB));
}

// Whether x holds put(x, seed) plus `plus` in every word.
bool holds(CUdeviceptr x, uint32_t seed, uint32_t plus) {
  std::vector<uint32_t> v(kWords);
  CK(cuMemcpyDtoH(v.data(), x, 4 * MiB));
  for (size_t i = 0; i < kWords; ++i) {
    if (v[i] != seed * 1000003u + static_cast<uint32_t>(i) + plus) return false;
  }
  return true;
}

}  // namespace

int main() {
  preload::use_device0();
  size_t sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_inc), sizes, 2) == 0);
  CUstream st;
  CK(cuStreamCreate(&st, 0));

  CUdeviceptr a = 0, b = 0, c = 0;
  {
    Count create("cuMemCreate"), alloc("cuMemAlloc_v2"), managed("cuMemAllocManaged");
    CK(cuMemAlloc(&a, 4 * MiB));
    CK(cuMemAlloc(&b, 4 * MiB));
    CHECK(create.added() == 2);  // one device chunk each, within the 8 MiB
    CK(cuMemAlloc(&c, 4 * MiB));
    CHECK(create.added() == 3);  // past the budget: a host chunk
    CHECK(alloc.added() == 0);
    CHECK(managed.added() == 0);
  }
  put(a, 1);
  put(b, 2);
  put(c, 3);

  // c is on the host; the launch brings it in and a, the least recently used, goes out.
  {
    Count sync("cuCtxSynchronize"), unmap("cuMemUnmap"), create("cuMemCreate");
    CK(inc(c, st));
    CHECK(sync.added() >= 2);  // before a's remap, and before c's
    CHECK(unmap.added() == 2);
    CHECK(create.added() == 2);  // a host chunk for a, a device chunk for c
    CHECK(last("cuCtxSynchronize") < last("cuMemUnmap"));
    CHECK(last("cuMemUnmap") < last("cuLaunchKernel"));
  }
  CHECK(holds(a, 1, 0));
  CHECK(holds(b, 2, 0));
  CHECK(holds(c, 3, 1));

  // a comes back (b goes: c was used since), keeps its data, and the kernel changes it.
  {
    Count create("cuMemCreate");
    CK(inc(a, st));
    CHECK(create.added() == 1);  // a's device chunk; b reuses the host chunk c left
  }
  CK(inc(a, st));  // resident now: no move
  CHECK(holds(a, 1, 2));
  CHECK(holds(b, 2, 0));
  CHECK(holds(c, 3, 1));
  {
    Count unmap("cuMemUnmap"), release("cuMemRelease"), free_va("cuMemAddressFree");
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    CK(cuMemFree(c));
    // The three ranges; with the last, the two spare host chunks (a's first, b's) and their ranges.
    CHECK(unmap.added() == 3 + 2);
    CHECK(release.added() == 2 + 2);  // a's and c's device chunks, then the spare host chunks
    CHECK(free_va.added() == 3 + 2);
  }
  CK(cuStreamDestroy(st));
  std::printf("swap ok\n");
  return 0;
}
