#include "act/heap.h"

#include <mutex>

#include "act/arrays.h"
#include "act/config.h"
#include "core/guard.h"
#include "core/ledger.h"
#include "driver/calls.h"

namespace gms::act {
namespace {

struct Heaps {
  std::mutex mu;
  size_t initial[DeviceLedger::kMaxDevices] = {};
  bool known[DeviceLedger::kMaxDevices] = {};
};

Heaps& heaps() {
  static NoDestructor<Heaps> h;
  return *h;
}

}  // namespace

CUresult set_heap_size(size_t bytes, CUresult (*set)(void*), void* ctx) {
  int dev = driver::current_device();
  if (dev < 0 || dev >= DeviceLedger::kMaxDevices || !placement_active()) return set(ctx);
  Heaps& h = heaps();
  std::lock_guard lock(h.mu);
  if (!h.known[dev]) {
    // The size before the program's first change is part of the context, as the context's own
    // memory is: not counted.
    size_t now = 0;
    if (driver::call_real(GMS_REAL(cuCtxGetLimit), &now, CU_LIMIT_MALLOC_HEAP_SIZE) != CUDA_SUCCESS) return set(ctx);
    h.initial[dev] = now;
    h.known[dev] = true;
  }
  // A device's heap is booked under the key `dev`: no array handle is that small.
  const uint64_t key = static_cast<uint64_t>(dev);
  const uint64_t want = bytes > h.initial[dev] ? bytes - h.initial[dev] : 0;
  const ArrayBooked was = array_destroying(key);
  if (want > 0 && !array_may_create(want, &dev, "device malloc heap")) {
    if (was.bytes) array_created(key, was.bytes, was.dev);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = set(ctx);
  if (r == CUDA_SUCCESS) {
    if (want > 0) array_created(key, want, dev);
  } else if (was.bytes) {
    array_created(key, was.bytes, was.dev);
  }
  return r;
}

}  // namespace gms::act
