#include "budget.h"

#include "calls.h"
#include "core/runtime.h"

namespace gms::budget {

uint64_t of(int dev, uint64_t total) { return options().device_limit.for_device(dev, total); }

uint64_t limit(int dev) {
  uint64_t l = ledger().limit(dev);
  if (l != 0 || dev < 0) return l;
  size_t total = 0;
  if (driver::call_real(GMS_REAL(cuDeviceTotalMem_v2), &total, static_cast<CUdevice>(dev)) != CUDA_SUCCESS) return 0;
  l = of(dev, total);
  ledger().set_limit(dev, l);
  return l;
}

uint64_t left(int dev) {
  const uint64_t l = limit(dev), used = ledger().used(dev);
  return used < l ? l - used : 0;
}

void clamp_mem_info(int dev, size_t* free_bytes, size_t* total_bytes) {
  const uint64_t l = limit(dev);
  if (l == 0) return;
  const uint64_t used = ledger().used(dev);  // prefetched managed memory is evictable, so it is free
  const uint64_t rest = used < l ? l - used : 0;
  if (total_bytes) *total_bytes = l;
  if (free_bytes && *free_bytes > rest) *free_bytes = rest;
}

}  // namespace gms::budget
