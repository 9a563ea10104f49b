// Placement on two GPUs (issue 3), run under GPUMEMSHIM_POLICY=spill with
// GPUMEMSHIM_DEVICE_LIMIT=0:96M,1:48M (GPU safety: 96 MiB of managed memory at most):
// - each device reports its own budget as its total memory;
// - allocations past a device's own budget are spilled (managed), those within it stay on it;
// - a kernel on device 1 over its spilled buffer leaves it remote while it does not fit device 1's
//   budget, and prefetches it to device 1 (not device 0) once it does;
// - a kernel on device 0 reads device 1's spilled buffer and its own: right values;
// - after the frees each device's free memory is back where it started.
// Prints "ok", "skip: ..." with fewer than two GPUs, or what went wrong and exits 1.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "checks.cuh"

namespace {

constexpr size_t MiB = 1 << 20;

bool is_managed(const void* p) {
  cudaPointerAttributes at{};
  return cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type == cudaMemoryTypeManaged;
}
bool on_device(const void* p, int dev) {
  cudaPointerAttributes at{};
  return cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type == cudaMemoryTypeDevice && at.device == dev;
}
// Was [p, p+n) last prefetched to device `dev`?
bool prefetched_to(const void* p, size_t n, int dev) {
  int type = -1, id = -1;
  if (cudaMemRangeGetAttribute(&type, sizeof(type), cudaMemRangeAttributeLastPrefetchLocationType, p, n) !=
          cudaSuccess ||
      cudaMemRangeGetAttribute(&id, sizeof(id), cudaMemRangeAttributeLastPrefetchLocationId, p, n) != cudaSuccess) {
    return false;
  }
  return type == cudaMemLocationTypeDevice && id == dev;
}
bool all_equal(const float* dev_or_managed, size_t n, float v) {
  std::vector<float> h(n);
  if (cudaMemcpy(h.data(), dev_or_managed, n * sizeof(float), cudaMemcpyDefault) != cudaSuccess) return false;
  for (float x : h) {
    if (x != v) return false;
  }
  return true;
}

}  // namespace

int main() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::printf("skip: %d GPU(s)\n", count);
    return 0;
  }
  const size_t budget[2] = {96 * MiB, 48 * MiB};
  size_t free_at_start[2];
  for (int d = 0; d < 2; ++d) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaFree(nullptr));
    size_t free = 0, total = 0;
    CHECK(cudaMemGetInfo(&free, &total));
    EXPECT(total == budget[d]);
    EXPECT(free <= budget[d]);
    free_at_start[d] = free;
  }

  // Device 0: 64 MiB kept, the next 64 MiB spilled. Device 1: 32 MiB kept, the next 32 spilled.
  const size_t n0 = 64 * MiB / sizeof(float), n1 = 32 * MiB / sizeof(float);
  float *a0, *b0, *a1, *b1;
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&a0, n0 * sizeof(float)));
  CHECK(cudaMalloc(&b0, n0 * sizeof(float)));
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc(&a1, n1 * sizeof(float)));
  CHECK(cudaMalloc(&b1, n1 * sizeof(float)));
  EXPECT(on_device(a0, 0) && is_managed(b0));
  EXPECT(on_device(a1, 1) && is_managed(b1));

  // On device 1, while b1 does not fit its budget: used where it lives, not moved.
  fill<<<256, 256>>>(a1, n1, 2.0f);
  fill<<<256, 256>>>(b1, n1, 1.0f);
  CHECK(cudaDeviceSynchronize());
  EXPECT(!prefetched_to(b1, n1 * sizeof(float), 1));
  // a1 freed: b1 fits device 1's budget, and the next kernel there finds it moved to device 1.
  CHECK(cudaFree(a1));
  add<<<256, 256>>>(b1, b1, b1, n1);
  CHECK(cudaDeviceSynchronize());
  EXPECT(prefetched_to(b1, n1 * sizeof(float), 1));
  EXPECT(all_equal(b1, n1, 2.0f));

  // On device 0: its own spilled buffer and device 1's, read by one kernel.
  CHECK(cudaSetDevice(0));
  fill<<<256, 256>>>(b0, n0, 3.0f);
  add<<<256, 256>>>(a0, b0, b1, n1);
  CHECK(cudaDeviceSynchronize());
  EXPECT(all_equal(a0, n1, 5.0f));
  EXPECT(all_equal(b0, n0, 3.0f));
  EXPECT(!prefetched_to(b1, n1 * sizeof(float), 0));  // device 1's memory, device 1's budget

  CHECK(cudaFree(a0));
  CHECK(cudaFree(b0));
  CHECK(cudaSetDevice(1));
  CHECK(cudaFree(b1));
  for (int d = 0; d < 2; ++d) {
    CHECK(cudaSetDevice(d));
    size_t free = 0, total = 0;
    CHECK(cudaMemGetInfo(&free, &total));
    EXPECT(free == free_at_start[d]);
  }
  std::printf("ok\n");
  return 0;
}
