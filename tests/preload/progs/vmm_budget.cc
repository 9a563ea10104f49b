// The program's own virtual memory management (cuMemCreate, cuMemMap) under a device budget, over
// the stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=16M and a managed cap of 64M; argv[1] is
// the policy the runner set ("off" or any other), last on the command line. Checks:
// - device handles count against the budget from creation (cuMemGetInfo's free shrinks by them,
//   not by their mappings: one handle mapped twice counts once);
// - past the budget a device handle is made in host memory under every policy but off (the
//   program's mappings and access calls work unchanged, every byte written reads back), and off
//   refuses it with out-of-memory;
// - a handle asked for with a shareable handle type (PyTorch asks on every segment) is host
//   memory past the budget as well, and keeps its handle type;
// - the room comes back at the last release (cuMemRetainAllocationHandle adds one);
// - host memory the program asks for itself is never counted against the device.
#include <cstring>
#include <vector>

#include "common.h"

namespace {

constexpr size_t MiB = 1u << 20;

CUmemAllocationProp device_prop() {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  return p;
}

size_t free_now() { return preload::free_within(16 * MiB); }

// Maps `h` at a new reservation with device access, fills it with `v` through a copy and reads it
// back; returns the reservation.
CUdeviceptr map_and_check(CUmemGenericAllocationHandle h, size_t n, unsigned char v) {
  CUdeviceptr va = 0;
  CK(cuMemAddressReserve(&va, n, 0, 0, 0));
  CK(cuMemMap(va, n, 0, h, 0));
  CUmemAccessDesc a{};
  a.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(va, n, &a, 1));
  std::vector<unsigned char> in(n, v), out(n, 0);
  CK(cuMemcpyHtoD(va, in.data(), n));
  CK(cuMemcpyDtoH(out.data(), va, n));
  CHECK(std::memcmp(in.data(), out.data(), n) == 0);
  return va;
}

void unmap(CUdeviceptr va, size_t n) {
  CK(cuMemUnmap(va, n));
  CK(cuMemAddressFree(va, n));
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc >= 2);
  const char* policy = argv[argc - 1];
  const bool off = std::strcmp(policy, "off") == 0;
  preload::use_device0();
  const CUmemAllocationProp dp = device_prop();
  const size_t f0 = free_now();

  CUmemGenericAllocationHandle a = 0, b = 0, c = 0;
  CK(cuMemCreate(&a, 10 * MiB, &dp, 0));
  CHECK(fake_cuda_handle_on_host(a) == 0);
  CHECK(free_now() == f0 - 10 * MiB);
  CUdeviceptr va = map_and_check(a, 10 * MiB, 1);
  CUdeviceptr va2 = map_and_check(a, 10 * MiB, 2);  // the same memory twice: counted once
  CHECK(free_now() == f0 - 10 * MiB);

  // 10 + 8 > 16: past the budget.
  CUresult r = cuMemCreate(&b, 8 * MiB, &dp, 0);
  if (off) {
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
  } else {
    CHECK(r == CUDA_SUCCESS);
    CHECK(fake_cuda_handle_on_host(b) == 1);
    CHECK(free_now() == f0 - 10 * MiB);  // host memory: not the device's
    CUdeviceptr vb = map_and_check(b, 8 * MiB, 3);
    unmap(vb, 8 * MiB);
    CK(cuMemRelease(b));
  }

  // Exportable past the budget: host memory too, still exportable (off: refused).
  CUmemAllocationProp ex = dp;
  ex.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  r = cuMemCreate(&c, 8 * MiB, &ex, 0);
  if (off) {
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
  } else {
    CHECK(r == CUDA_SUCCESS);
    CHECK(fake_cuda_handle_on_host(c) == 1);
    CHECK(fake_cuda_handle_types(c) == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CK(cuMemRelease(c));
  }

  // Host memory the program asks for: the driver's business, not the device's budget.
  CUmemAllocationProp hp = dp;
  hp.location = {CU_MEM_LOCATION_TYPE_HOST, 0};
  CK(cuMemCreate(&c, 8 * MiB, &hp, 0));
  CHECK(free_now() == f0 - 10 * MiB);
  CK(cuMemRelease(c));

  // A retained handle keeps its room until its last release.
  CUmemGenericAllocationHandle again = 0;
  CK(cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(va)));
  CHECK(again == a);
  CK(cuMemRelease(a));
  CHECK(free_now() == f0 - 10 * MiB);
  unmap(va, 10 * MiB);
  unmap(va2, 10 * MiB);
  CK(cuMemRelease(again));
  CHECK(free_now() == f0);
  // And the whole budget is there again.
  CK(cuMemCreate(&b, 16 * MiB, &dp, 0));
  CHECK(fake_cuda_handle_on_host(b) == 0);
  CK(cuMemRelease(b));
  std::printf("vmm ok (%s)\n", policy);
  return 0;
}
