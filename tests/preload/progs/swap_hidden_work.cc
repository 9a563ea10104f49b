// Work that reaches parked movable memory by ways the launch scan does not read
// (GPUMEMSHIM_SWAP_ORDER=scan, GPUMEMSHIM_SWAP_PARK=on), over the stand-in driver. Run with
// GPUMEMSHIM_DEVICE_LIMIT=8M and GPUMEMSHIM_SWAP_CHUNK=4M (two chunks on the device).
//
// - Stream memory operations (cuStreamWriteValue32/64) write a word of parked memory: unless the
//   hook plans the word like a memset, the stand-in finds it unmapped and fails the call.
// - A kernel named as NCCL's finds its buffer through a descriptor in pinned host memory, as NCCL's
//   kernels find theirs: unless a kernel of that name counts as work no scan sees (every parked
//   chunk mapped first), the host "kernel" dies of SIGSEGV.
// - A kernel finds its buffer through a descriptor in the program's managed memory, and another
//   through a module's variable (device memory no allocation call made) that a copy filled: the
//   same, unless the first counts as work no scan sees and every launch is ordered against what
//   the variable names.
// Every word is checked after.
#include "swap_common.h"

using namespace swap_test;

namespace {

// Adds one to every word of the buffer the descriptor names; params: const CUdeviceptr* descriptor
// (host memory), size_t count
void k_nccl_like(void** p) {
  const CUdeviceptr* desc = *static_cast<const CUdeviceptr* const*>(p[0]);
  uint32_t* x = preload::dev_ptr<uint32_t>(desc[0]);
  size_t n = *static_cast<size_t*>(p[1]);
  for (size_t i = 0; i < n; ++i) x[i] += 1;
}

// Adds one to every word of the buffer named at desc[0] (device or managed memory); params:
// CUdeviceptr desc, size_t count
void k_via_desc(void** p) {
  const CUdeviceptr* desc = preload::dev_ptr<CUdeviceptr>(*static_cast<CUdeviceptr*>(p[0]));
  uint32_t* x = preload::dev_ptr<uint32_t>(desc[0]);
  size_t n = *static_cast<size_t*>(p[1]);
  for (size_t i = 0; i < n; ++i) x[i] += 1;
}

// The module's variable: known to its kernels, not passed to them.
CUdeviceptr g_variable = 0;

// Adds one to every word of the buffer the module's variable names; params: size_t count
void k_via_variable(void** p) {
  uint32_t* x = preload::dev_ptr<uint32_t>(*preload::dev_ptr<CUdeviceptr>(g_variable));
  size_t n = *static_cast<size_t*>(p[0]);
  for (size_t i = 0; i < n; ++i) x[i] += 1;
}

}  // namespace

int main() {
  preload::use_device0();
  declare_kernels();
  size_t sizes[] = {sizeof(void*), sizeof(size_t)};
  CUfunction nccl = preload::as_function(k_nccl_like);
  CHECK(fake_cuda_set_kernel_params(nccl, sizes, 2) == 0);
  CHECK(fake_cuda_set_kernel_name(nccl, "_Z31ncclDevKernel_AllReduce_RING_LL17ncclDevKernelArgs4K") == 0);
  CUdeviceptr x[5] = {};
  for (uint32_t i = 0; i < 5; ++i) {
    CK(cuMemAlloc(&x[i], 4 * MiB));
    put(x[i], 10 + i);
  }
  // a (x[0]), b and c are parked now: one word of a and one of b written by the stream.
  CK(cuStreamWriteValue32(nullptr, x[0], 10 * 1000003u + 1, 0));  // word 0 of a, plus one
  CK(cuStreamWriteValue64(nullptr, x[1] + 8, (uint64_t{11 * 1000003u + 3 + 1} << 32) | (11 * 1000003u + 2 + 1), 0));
  // d and e in use: a, b and c parked again. The "NCCL" kernel adds one to c through host memory.
  CK(inc(x[3], nullptr));
  CK(inc(x[4], nullptr));
  CUdeviceptr* desc = nullptr;
  CK(cuMemAllocHost(reinterpret_cast<void**>(&desc), sizeof(CUdeviceptr)));
  desc[0] = x[2];
  size_t n = kWords;
  void* params[] = {&desc, &n};
  CK(cuLaunchKernel(nccl, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  // c brought in and parked again (d and e in use after it): c through a descriptor in managed
  // memory.
  size_t desc_sizes[] = {sizeof(CUdeviceptr), sizeof(size_t)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_via_desc), desc_sizes, 2) == 0);
  CK(inc(x[2], nullptr));
  CK(inc(x[3], nullptr));
  CK(inc(x[4], nullptr));
  CUdeviceptr managed = 0;
  CK(cuMemAllocManaged(&managed, sizeof(CUdeviceptr), CU_MEM_ATTACH_GLOBAL));
  *preload::dev_ptr<CUdeviceptr>(managed) = x[2];
  void* desc_params[] = {&managed, &n};
  CK(cuLaunchKernel(preload::as_function(k_via_desc), 1, 1, 1, 1, 1, 1, 0, nullptr, desc_params, nullptr));
  // And c again through the module's variable, which a copy from the host filled.
  size_t var_sizes[] = {sizeof(size_t)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_via_variable), var_sizes, 1) == 0);
  g_variable = fake_cuda_module_global(sizeof(CUdeviceptr));
  CHECK(g_variable != 0);
  CK(cuMemcpyHtoD(g_variable, &x[2], sizeof(CUdeviceptr)));
  CK(inc(x[2], nullptr));
  CK(inc(x[3], nullptr));
  CK(inc(x[4], nullptr));
  void* var_params[] = {&n};
  CK(cuLaunchKernel(preload::as_function(k_via_variable), 1, 1, 1, 1, 1, 1, 0, nullptr, var_params, nullptr));
  CK(cuCtxSynchronize());

  std::vector<uint32_t> v(kWords);
  CK(cuMemcpyDtoH(v.data(), x[0], 4 * MiB));
  CHECK(v[0] == 10 * 1000003u + 1 && v[1] == 10 * 1000003u + 1);
  CK(cuMemcpyDtoH(v.data(), x[1], 4 * MiB));
  CHECK(v[2] == 11 * 1000003u + 3 && v[3] == 11 * 1000003u + 4 && v[4] == 11 * 1000003u + 4);
  CHECK(holds(x[2], 12, 5));
  CHECK(holds(x[3], 13, 3));
  CHECK(holds(x[4], 14, 3));
  CK(cuMemFreeHost(desc));
  CK(cuMemFree(managed));
  for (CUdeviceptr p : x) CK(cuMemFree(p));
  std::printf("swap hidden work ok\n");
  return 0;
}
