#include "calls.h"

namespace gms::driver {

int current_device() {
  CUdevice dev = -1;
  if (call_real(GMS_REAL(cuCtxGetDevice), &dev) != CUDA_SUCCESS) return -1;
  return static_cast<int>(dev);
}

int device_of(uintptr_t p) {
  int dev = -1;
  if (call_real(GMS_REAL(cuPointerGetAttribute), &dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, static_cast<CUdeviceptr>(p)) !=
      CUDA_SUCCESS) {
    return -1;
  }
  return dev;
}

}  // namespace gms::driver
