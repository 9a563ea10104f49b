// Pointer queries at parked movable memory (GPUMEMSHIM_SWAP_ORDER=scan, GPUMEMSHIM_SWAP_PARK=on),
// over the stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=8M and GPUMEMSHIM_SWAP_CHUNK=4M (two
// chunks on the device).
//
// a, b, c, d and e are made in turn: each past the second evicts the least recently used, and an
// evicted chunk is parked (nothing mapped at its place), so the driver knows nothing there. Each
// way of asking about a pointer must still answer as for movable memory anywhere: the shim maps a
// parked chunk's host memory where it is first (CuPy asks so when it imports a PyTorch tensor).
// Every word is checked after.
#include "swap_common.h"

using namespace swap_test;

int main() {
  preload::use_device0();
  declare_kernels();
  CUdeviceptr x[5] = {};
  for (uint32_t i = 0; i < 5; ++i) {
    CK(cuMemAlloc(&x[i], 4 * MiB));
    put(x[i], 10 + i);
  }
  // a (x[0]), b and c are parked now.
  unsigned int type = 0;
  CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, x[0] + 4096));
  CHECK(type == CU_MEMORYTYPE_DEVICE);

  // The driver answers this one for memory it does not know too, with defaults (memory type 0,
  // device ordinal -2).
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  int ordinal = -1;
  type = 0;
  void* answers[] = {&type, &ordinal};
  CK(cuPointerGetAttributes(2, attrs, answers, x[1]));
  CHECK(type == CU_MEMORYTYPE_DEVICE && ordinal == 0);

  CUdeviceptr base = 0;
  size_t size = 0;
  CK(cuMemGetAddressRange(&base, &size, x[2] + 100));
  CHECK(base <= x[2] && x[2] + 100 < base + size);

  for (uint32_t i = 0; i < 5; ++i) CHECK(holds(x[i], 10 + i, 0));
  for (CUdeviceptr p : x) CK(cuMemFree(p));
  std::printf("swap query ok\n");
  return 0;
}
