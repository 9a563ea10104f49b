// (f) 16 threads at once: each allocates, copies (sync and async, pageable and pinned) and frees,
// and allocates and frees large host blocks. Even threads use the default-stream implementations,
// odd threads the per-thread ones (fetched with cuGetProcAddress flag 2). Totals are known exactly;
// the peaks too, because every thread holds its largest blocks at one barrier.
//
// Per thread (K iterations, T = 64 KiB, P = 256 KiB, pinned buffer T):
//   cuMemHostAlloc T; K x { cuMemAlloc T; HtoD pageable; DtoH pageable; HtoDAsync pinned;
//   DtoHAsync pinned; cuMemFree }; cuMemAlloc P; barrier; cuMemsetD8 P; DtoH 4 KiB pageable;
//   cuMemFree P; cuMemFreeHost.
//   Host blocks: K x { malloc 1.5 MiB; free }; malloc 2 MiB; barrier; free.
#include <pthread.h>

#include <vector>

#include "common.h"

namespace {

constexpr int kThreads = 16;
constexpr int kIters = 50;
constexpr size_t T = 64 * 1024;
constexpr size_t P = 256 * 1024;
constexpr size_t kLoopBlock = 3 * 512 * 1024;  // 1.5 MiB
constexpr size_t kHeldBlock = 2 * 1024 * 1024;

struct Fns {
  PFN_cuMemcpyHtoD_v3020 htod;
  PFN_cuMemcpyDtoH_v3020 dtoh;
  PFN_cuMemcpyHtoDAsync_v3020 htod_async;
  PFN_cuMemcpyDtoHAsync_v3020 dtoh_async;
  PFN_cuMemsetD8_v3020 memset8;
  PFN_cuStreamSynchronize_v2000 sync;
};
Fns g_fns[2];  // [0]: default stream, [1]: per-thread default stream
CUcontext g_ctx;
pthread_barrier_t g_barrier;

void* worker(void* arg) {
  int id = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  const Fns& f = g_fns[id & 1];
  CK(cuCtxSetCurrent(g_ctx));
  CUstream s = nullptr;
  CK(cuStreamCreate(&s, 0));
  unsigned char* pin = nullptr;
  CK(cuMemHostAlloc(reinterpret_cast<void**>(&pin), T, 0));
  std::vector<unsigned char> h(T), back(T);
  for (int it = 0; it < kIters; ++it) {
    auto* big = static_cast<unsigned char*>(std::malloc(kLoopBlock));
    CHECK(big);
    big[0] = big[kLoopBlock - 1] = static_cast<unsigned char>(it);
    CUdeviceptr d = 0;
    CK(cuMemAlloc(&d, T));
    for (size_t i = 0; i < T; ++i) h[i] = static_cast<unsigned char>(i * 7 + id * 13 + it);
    CK(f.htod(d, h.data(), T));
    CK(f.dtoh(back.data(), d, T));
    CHECK(back == h);
    for (size_t i = 0; i < T; ++i) pin[i] = static_cast<unsigned char>(255 - h[i]);
    CK(f.htod_async(d, pin, T, s));
    std::memset(pin, 0, T);
    CK(f.dtoh_async(pin, d, T, s));
    CK(f.sync(s));
    for (size_t i = 0; i < T; ++i) CHECK(pin[i] == static_cast<unsigned char>(255 - h[i]));
    CK(cuMemFree(d));
    CHECK(big[0] == static_cast<unsigned char>(it) && big[kLoopBlock - 1] == static_cast<unsigned char>(it));
    std::free(big);
  }
  CUdeviceptr d = 0;
  CK(cuMemAlloc(&d, P));
  auto* held = static_cast<unsigned char*>(std::malloc(kHeldBlock));
  CHECK(held);
  std::memset(held, id, kHeldBlock);
  pthread_barrier_wait(&g_barrier);  // every thread holds P of device memory and one 2 MiB block
  CK(f.memset8(d, static_cast<unsigned char>(id + 1), P));
  CK(f.dtoh(h.data(), d + P - 4096, 4096));
  for (size_t i = 0; i < 4096; ++i) CHECK(h[i] == static_cast<unsigned char>(id + 1));
  CK(cuMemFree(d));
  CHECK(held[kHeldBlock - 1] == static_cast<unsigned char>(id));
  std::free(held);
  CK(cuMemFreeHost(pin));
  CK(cuStreamDestroy(s));
  return nullptr;
}

template <typename F>
void get(F* out, const char* base, int flags, bool shim) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult st;
  CK(cuGetProcAddress(base, &p, 12000, flags, &st));
  CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
  preload::check_hooked(p, shim, base);
  *out = reinterpret_cast<F>(p);
}

}  // namespace

int main(int argc, char** argv) {
  bool shim = preload::has_arg(argc, argv, "--shim");
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&g_ctx, dev));
  for (int pt = 0; pt < 2; ++pt) {
    int flags = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
    get(&g_fns[pt].htod, "cuMemcpyHtoD", flags, shim);
    get(&g_fns[pt].dtoh, "cuMemcpyDtoH", flags, shim);
    get(&g_fns[pt].htod_async, "cuMemcpyHtoDAsync", flags, shim);
    get(&g_fns[pt].dtoh_async, "cuMemcpyDtoHAsync", flags, shim);
    get(&g_fns[pt].memset8, "cuMemsetD8", flags, shim);
    get(&g_fns[pt].sync, "cuStreamSynchronize", flags, shim);
  }
  const char* names[2][5] = {
      {"cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemsetD8_v2"},
      {"cuMemcpyHtoD_v2_ptds", "cuMemcpyDtoH_v2_ptds", "cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyDtoHAsync_v2_ptsz",
       "cuMemsetD8_v2_ptds"}};
  unsigned long before[2][5];
  for (int pt = 0; pt < 2; ++pt) {
    for (int i = 0; i < 5; ++i) before[pt][i] = fake_cuda_calls(names[pt][i]);
  }
  unsigned long allocs_before = fake_cuda_calls("cuMemAlloc_v2");

  pthread_barrier_init(&g_barrier, nullptr, kThreads);
  pthread_t th[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    CHECK(pthread_create(&th[i], nullptr, worker, reinterpret_cast<void*>(static_cast<intptr_t>(i))) == 0);
  }
  for (int i = 0; i < kThreads; ++i) CHECK(pthread_join(th[i], nullptr) == 0);
  pthread_barrier_destroy(&g_barrier);

  // Each half of the threads reached its own implementations, each call exactly once.
  const unsigned long half = kThreads / 2;
  const unsigned long expect[5] = {half * kIters, half * (kIters + 1), half * kIters, half * kIters, half};
  for (int pt = 0; pt < 2; ++pt) {
    for (int i = 0; i < 5; ++i) {
      unsigned long got = fake_cuda_calls(names[pt][i]) - before[pt][i];
      if (got != expect[i]) {
        std::fprintf(stderr, "%s: %lu calls, expected %lu\n", names[pt][i], got, expect[i]);
        return 1;
      }
    }
  }
  CHECK(fake_cuda_calls("cuMemAlloc_v2") - allocs_before == static_cast<unsigned long>(kThreads) * (kIters + 1));
  std::printf("threads: ok\n");
  return 0;
}
