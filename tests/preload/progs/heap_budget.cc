// The device-side malloc heap (cuCtxSetLimit with CU_LIMIT_MALLOC_HEAP_SIZE) under a device budget,
// over the stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=16M; argv[1] is the policy the runner
// set, last on the command line. Checks:
// - what the heap grows by beyond its starting size (8 MiB) counts against the budget;
// - a size past the budget is refused with out-of-memory, and the heap keeps the size it had;
// - setting it back, or below its start, gives the room back;
// - other limits pass through unchanged.
#include <cstring>

#include "common.h"

namespace {

constexpr size_t MiB = 1u << 20;

size_t free_now() { return preload::free_within(16 * MiB); }

size_t heap() {
  size_t v = 0;
  CK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc >= 2);
  const char* policy = argv[argc - 1];
  preload::use_device0();
  const size_t f0 = free_now();
  CHECK(heap() == 8 * MiB);
  CK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 12 * MiB));
  CHECK(heap() == 12 * MiB);
  CHECK(free_now() == f0 - 4 * MiB);
  CHECK_RESULT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 28 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(heap() == 12 * MiB);
  CHECK(free_now() == f0 - 4 * MiB);
  CK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 20 * MiB));  // 12 of 16 MiB
  CHECK(free_now() == f0 - 12 * MiB);
  CK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB));
  CHECK(free_now() == f0);
  CK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 4 * MiB));
  CHECK(free_now() == f0);
  CK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 64 * MiB));  // not the heap: not the shim's business
  size_t stack = 0;
  CK(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
  CHECK(stack == 64 * MiB && free_now() == f0);
  std::printf("heap ok (%s)\n", policy);
  return 0;
}
