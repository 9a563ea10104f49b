// Texture objects over parked movable memory (GPUMEMSHIM_SWAP_ORDER=scan, GPUMEMSHIM_SWAP_PARK=on),
// over the stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=8M and GPUMEMSHIM_SWAP_CHUNK=4M (two
// chunks on the device).
//
// A kernel that reads memory through a texture object gets a handle, not a pointer: unless the
// launch scan takes the handle for the memory, a parked chunk stays unmapped and the kernel faults
// (the stand-in's host "kernel" dies of SIGSEGV). a, b, c, d and e are made in turn, so a, b and c
// are parked; a kernel adds one to a through a linear texture and to b through a pitched one, then
// a handle destroyed and made again names the new texture's memory. Every word is checked after.
#include "swap_common.h"

using namespace swap_test;

namespace {

// x[i] += 1 where x is the memory texture object t reads; params: CUtexObject t, size_t count
void k_tex_inc(void** p) {
  uint32_t* x = preload::dev_ptr<uint32_t>(fake_cuda_texture_ptr(*static_cast<CUtexObject*>(p[0])));
  size_t n = *static_cast<size_t*>(p[1]);
  for (size_t i = 0; i < n; ++i) x[i] += 1;
}

CUresult tex_inc(CUtexObject t) {
  size_t n = kWords;
  void* params[] = {&t, &n};
  return cuLaunchKernel(preload::as_function(k_tex_inc), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
}

// A texture of 32-bit words over the 4 MiB at x: linear, or pitched as 1024 rows of 4 KiB.
CUtexObject texture(CUdeviceptr x, bool pitched) {
  CUDA_RESOURCE_DESC res = {};
  if (pitched) {
    res.resType = CU_RESOURCE_TYPE_PITCH2D;
    res.res.pitch2D = {x, CU_AD_FORMAT_UNSIGNED_INT32, 1, 1024, 1024, 4096};
  } else {
    res.resType = CU_RESOURCE_TYPE_LINEAR;
    res.res.linear = {x, CU_AD_FORMAT_UNSIGNED_INT32, 1, 4 * MiB};
  }
  CUDA_TEXTURE_DESC desc = {};
  CUtexObject t = 0;
  CK(cuTexObjectCreate(&t, &res, &desc, nullptr));
  return t;
}

}  // namespace

int main() {
  preload::use_device0();
  size_t sizes[] = {sizeof(CUtexObject), sizeof(size_t)};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(k_tex_inc), sizes, 2) == 0);
  CUdeviceptr x[5] = {};
  for (uint32_t i = 0; i < 5; ++i) {
    CK(cuMemAlloc(&x[i], 4 * MiB));
    put(x[i], 10 + i);
  }
  // a (x[0]), b and c are parked now.
  CUtexObject ta = texture(x[0], false), tb = texture(x[1], true);
  CK(tex_inc(ta));
  CK(tex_inc(tb));
  CK(tex_inc(ta));
  CK(cuTexObjectDestroy(ta));
  // Parks a and b again: d and e are used last.
  put(x[3], 13);
  put(x[4], 14);
  // The stand-in hands out a's handle again, for c now.
  CUtexObject tc = texture(x[2], false);
  CHECK(tc == ta);
  CK(tex_inc(tc));
  CK(tex_inc(tb));
  CK(cuCtxSynchronize());
  CK(cuTexObjectDestroy(tb));
  CK(cuTexObjectDestroy(tc));

  CHECK(holds(x[0], 10, 2));
  CHECK(holds(x[1], 11, 2));
  CHECK(holds(x[2], 12, 1));
  CHECK(holds(x[3], 13, 0));
  CHECK(holds(x[4], 14, 0));
  for (CUdeviceptr p : x) CK(cuMemFree(p));
  std::printf("swap tex ok\n");
  return 0;
}
