// (o) Faults: a workload through every path where the shim calls the driver for itself (placement
// past a budget, prefetch and moves before launches, registered and staged pageable copies,
// stream-ordered allocation), written so that any call may fail. The runner sets FAKE_CUDA_FAIL to
// fail the Nth call of one implementation (tests/preload/fake/fake_fault.h), for every N.
// Exit status: 0 with every result right; 3 when a call failed with the injected error and the
// program freed everything it held; 1 on wrong data, or a failure that is not the injected error.
#include "common.h"

namespace {

constexpr size_t MiB = 1u << 20;
constexpr size_t kBytes = 4 * MiB;  // a budget of 8M: the third and fourth buffers do not fit
constexpr size_t kCount = kBytes / 4;

CUresult g_first = CUDA_SUCCESS;
const char* g_where = nullptr;

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  if (g_first == CUDA_SUCCESS) {
    g_first = r;
    g_where = what;
  }
  return false;
}
#define STEP(call) \
  if (!ok((call), #call)) return false

[[noreturn]] void wrong(const char* what, size_t i, uint32_t got, uint32_t want) {
  std::fprintf(stderr, "faults: wrong data after %s at [%zu]: %u, expected %u\n", what, i, got, want);
  std::exit(1);
}

struct Held {
  CUdeviceptr dev[4] = {};
  uint32_t* pin = nullptr;
  uint32_t* pageable = nullptr;
  CUstream stream = nullptr;
  bool have_stream = false;
};

bool workload(Held& h) {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  STEP(cuInit(0));
  STEP(cuDeviceGet(&dev, 0));
  STEP(cuDevicePrimaryCtxRetain(&ctx, dev));
  STEP(cuCtxSetCurrent(ctx));
  size_t free_b = 0, total = 0;
  STEP(cuMemGetInfo(&free_b, &total));
  for (CUdeviceptr& d : h.dev) STEP(cuMemAlloc(&d, kBytes));
  STEP(cuMemAllocHost(reinterpret_cast<void**>(&h.pin), kBytes));
  STEP(cuStreamCreate(&h.stream, 0));
  h.have_stream = true;
  h.pageable = static_cast<uint32_t*>(std::malloc(kBytes));  // tracked: registration and staging
  CHECK(h.pageable);
  for (size_t i = 0; i < kCount; ++i) {
    h.pageable[i] = static_cast<uint32_t>(i);
    h.pin[i] = static_cast<uint32_t>(2 * i);
  }
  CUdeviceptr a = h.dev[0], b = h.dev[1], c = h.dev[2], d = h.dev[3];
  STEP(cuMemcpyHtoD(a, h.pageable, kBytes));                 // a = i
  STEP(cuMemcpyHtoDAsync(b, h.pin, kBytes, h.stream));       // b = 2i
  STEP(cuStreamSynchronize(h.stream));
  STEP(cuMemsetD32(c, 1u, kCount));                          // c = 1
  size_t count = kCount;
  void* add_params[] = {&c, &a, &b, &count};
  STEP(cuLaunchKernel(preload::as_function(preload::k_add3), 1, 1, 1, 1, 1, 1, 0, h.stream, add_params, nullptr));
  STEP(cuMemcpyDtoD(d, c, kBytes));                          // d = 3i + 1
  std::memset(h.pageable, 0, kBytes);
  STEP(cuMemcpyDtoH(h.pageable, d, kBytes));
  for (size_t i = 0; i < kCount; ++i)
    if (h.pageable[i] != 3 * i + 1) wrong("DtoH", i, h.pageable[i], static_cast<uint32_t>(3 * i + 1));
  CUdeviceptr e = 0;  // stream-ordered, past the budget
  STEP(cuMemAllocAsync(&e, kBytes, h.stream));
  bool e_ok = ok(cuMemsetD8Async(e, 5, kBytes, h.stream), "cuMemsetD8Async(e)");
  if (!ok(cuMemFreeAsync(e, h.stream), "cuMemFreeAsync(e)")) ok(cuMemFreeAsync(e, h.stream), "cuMemFreeAsync(e) again");
  if (!e_ok) return false;
  uint32_t two = 2;
  void* scale_params[] = {&c, &two, &count};
  CUlaunchConfig cfg = {};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = h.stream;
  STEP(cuLaunchKernelEx(&cfg, preload::as_function(preload::k_scale), scale_params, nullptr));  // c = 6i + 2
  STEP(cuMemcpyDtoHAsync(h.pin, c, kBytes, h.stream));
  STEP(cuStreamSynchronize(h.stream));
  for (size_t i = 0; i < kCount; ++i)
    if (h.pin[i] != 6 * i + 2) wrong("DtoHAsync", i, h.pin[i], static_cast<uint32_t>(6 * i + 2));
  return true;
}

// Frees everything; a free that fails (the injected failure) is tried once more.
template <typename F>
void twice(F free_it) {
  if (free_it() != CUDA_SUCCESS) free_it();
}

void release(Held& h) {
  for (CUdeviceptr d : h.dev)
    if (d) twice([&] { return cuMemFree(d); });
  if (h.pin) twice([&] { return cuMemFreeHost(h.pin); });
  if (h.have_stream) twice([&] { return cuStreamDestroy(h.stream); });
  std::free(h.pageable);
}

}  // namespace

int main() {
  size_t add_sizes[] = {8, 8, 8, 8}, scale_sizes[] = {8, 4, 8};
  CHECK(fake_cuda_set_kernel_params(preload::as_function(preload::k_add3), add_sizes, 4) == 0);
  CHECK(fake_cuda_set_kernel_params(preload::as_function(preload::k_scale), scale_sizes, 3) == 0);
  const char* code = std::getenv("FAULTS_INJECTED_ERROR");
  const int injected = code ? std::atoi(code) : CUDA_ERROR_OUT_OF_MEMORY;
  Held h;
  bool done = workload(h);
  release(h);
  if (done) {
    std::printf("faults: ok\n");
    return 0;
  }
  std::printf("faults: %s failed with %d\n", g_where, static_cast<int>(g_first));
  if (g_first != injected) {
    std::fprintf(stderr, "faults: %s returned %d, not the injected error %d\n", g_where, static_cast<int>(g_first),
                 injected);
    return 1;
  }
  return 3;
}
