// Pointer tables over parked movable memory (GPUMEMSHIM_SWAP_ORDER=scan, GPUMEMSHIM_SWAP_PARK=on),
// over the stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=8M and GPUMEMSHIM_SWAP_CHUNK=4M (two
// chunks on the device).
//
// A kernel given only a table of addresses (ordinary device memory) reaches the memory they name:
// unless the shim takes the table's addresses for uses of the launch, a parked chunk stays unmapped
// and the kernel faults (the stand-in's host "kernel" dies of SIGSEGV). One table is filled by a
// copy from the host, the other by a kernel given the addresses; each is read after the chunks it
// names were parked again, and one through a parameter block that names a table. Every word is
// checked after.
#include "swap_common.h"

using namespace swap_test;

namespace {

constexpr int kSlots = 2;

// Adds one to every word of each buffer the table names; params: CUdeviceptr table, size_t count
void k_via_table(void** p) {
  auto* table = preload::dev_ptr<CUdeviceptr>(*static_cast<CUdeviceptr*>(p[0]));
  size_t n = *static_cast<size_t*>(p[1]);
  for (int j = 0; j < kSlots; ++j) {
    uint32_t* x = preload::dev_ptr<uint32_t>(table[j]);
    for (size_t i = 0; i < n; ++i) x[i] += 1;
  }
}

// table[0] = a, table[1] = b; params: CUdeviceptr table, CUdeviceptr a, CUdeviceptr b
void k_write_table(void** p) {
  auto* table = preload::dev_ptr<CUdeviceptr>(*static_cast<CUdeviceptr*>(p[0]));
  table[0] = *static_cast<CUdeviceptr*>(p[1]);
  table[1] = *static_cast<CUdeviceptr*>(p[2]);
}

// The same through a parameter block that names the table; params: CUdeviceptr block, size_t count
void k_via_block(void** p) {
  auto* block = preload::dev_ptr<CUdeviceptr>(*static_cast<CUdeviceptr*>(p[0]));
  CUdeviceptr table = block[0];
  void* inner[] = {&table, p[1]};
  k_via_table(inner);
}

CUresult via_table(CUdeviceptr table) {
  size_t n = kWords;
  void* params[] = {&table, &n};
  return cuLaunchKernel(preload::as_function(k_via_table), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
}

CUresult write_table(CUdeviceptr table, CUdeviceptr a, CUdeviceptr b) {
  void* params[] = {&table, &a, &b};
  return cuLaunchKernel(preload::as_function(k_write_table), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
}

}  // namespace

int main() {
  preload::use_device0();
  declare_kernels();
  size_t via_sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_via_table), via_sizes, 2) == 0);
  size_t write_sizes[] = {sizeof(CUdeviceptr), sizeof(CUdeviceptr), sizeof(CUdeviceptr)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_write_table), write_sizes, 3) == 0);
  CUdeviceptr x[5] = {};
  for (uint32_t i = 0; i < 5; ++i) {
    CK(cuMemAlloc(&x[i], 4 * MiB));
    put(x[i], 10 + i);
  }
  // a (x[0]), b and c are parked now. A table of a and b, filled from the host.
  CUdeviceptr by_copy = 0, by_kernel = 0;
  CK(cuMemAlloc(&by_copy, kSlots * sizeof(CUdeviceptr)));
  CK(cuMemAlloc(&by_kernel, kSlots * sizeof(CUdeviceptr)));
  const CUdeviceptr ab[kSlots] = {x[0], x[1]};
  CK(cuMemcpyHtoD(by_copy, ab, sizeof(ab)));
  CK(via_table(by_copy));
  // c and d in use: a and b parked again. A table of c and d written by a kernel given them (which
  // brings them in), then e in use, and the table read.
  CK(write_table(by_kernel, x[2], x[3]));
  CK(inc(x[4], nullptr));
  CK(inc(x[0], nullptr));
  CK(inc(x[1], nullptr));
  CK(via_table(by_kernel));
  // The same kernel writes the table again, a and b this time: its writes are known now.
  CK(write_table(by_kernel, x[0], x[1]));
  CK(inc(x[2], nullptr));
  CK(inc(x[3], nullptr));
  CK(via_table(by_kernel));
  // Through a parameter block filled from the host that names a table of two new buffers, y and
  // z, parked by two newer ones before the kernel.
  size_t block_sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_via_block), block_sizes, 2) == 0);
  CUdeviceptr y[4] = {};
  for (uint32_t i = 0; i < 2; ++i) {
    CK(cuMemAlloc(&y[i], 4 * MiB));
    put(y[i], 20 + i);
  }
  CUdeviceptr table = 0, block = 0;
  CK(cuMemAlloc(&table, kSlots * sizeof(CUdeviceptr)));
  CK(cuMemAlloc(&block, 2 * sizeof(CUdeviceptr)));
  CK(cuMemcpyHtoD(table, y, kSlots * sizeof(CUdeviceptr)));
  const CUdeviceptr names[2] = {table, 0};
  CK(cuMemcpyHtoD(block, names, sizeof(names)));
  for (uint32_t i = 2; i < 4; ++i) {
    CK(cuMemAlloc(&y[i], 4 * MiB));
    put(y[i], 20 + i);
  }
  size_t n = kWords;
  void* block_params[] = {&block, &n};
  CK(cuLaunchKernel(preload::as_function(k_via_block), 1, 1, 1, 1, 1, 1, 0, nullptr, block_params, nullptr));
  // A memset clears the table: nothing reached any more.
  CK(cuMemsetD8(by_copy, 0, sizeof(ab)));
  CK(cuCtxSynchronize());

  CHECK(holds(x[0], 10, 3));
  CHECK(holds(x[1], 11, 3));
  CHECK(holds(x[2], 12, 2));
  CHECK(holds(x[3], 13, 2));
  for (uint32_t i = 0; i < 4; ++i) CHECK(holds(y[i], 20 + i, i < 2 ? 1 : 0));
  CHECK(holds(x[4], 14, 1));
  CK(cuMemFree(by_copy));
  CK(cuMemFree(by_kernel));
  CK(cuMemFree(block));
  CK(cuMemFree(table));
  for (CUdeviceptr p : y) CK(cuMemFree(p));
  for (CUdeviceptr p : x) CK(cuMemFree(p));
  std::printf("swap tables ok\n");
  return 0;
}
