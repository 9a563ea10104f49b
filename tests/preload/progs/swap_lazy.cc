// Chunks brought back piece by piece (act/swap/fill.h) over the stand-in driver. Run with
// GPUMEMSHIM_POLICY=swap, GPUMEMSHIM_SWAP_ORDER=scan, GPUMEMSHIM_SWAP_CHUNK=4M and
// GPUMEMSHIM_DEVICE_LIMIT=8M (two chunks on the device): a1 and a2 (2 MiB each) share chunk A, x
// and y have a chunk each. First enough round trips of other chunks that kept host copies stop
// paying (policy/keep_copies.h: every chunk is written), then, with argument "lazy" (else every
// chunk comes back whole, GPUMEMSHIM_SWAP_LAZY=off):
// - A coming back for a launch on a1 copies in a1's piece alone, and leaving again copies out just
//   that piece: a2's bytes cross the link neither way;
// - a launch on a2 later copies a2's piece in;
// - work no scan sees (a 2D copy) finds every piece in;
// - once a2 is freed, A leaves with a1's piece alone (either way): a2's is copied neither way;
// - every word is right at the end.
#include <cstring>

#include "swap_common.h"

using namespace swap_test;

namespace {

constexpr size_t kHalf = kWords / 2;  // the words of 2 MiB

CUresult inc_n(CUdeviceptr x, size_t n, CUstream s) {
  void* params[] = {&x, &n};
  return cuLaunchKernel(preload::as_function(k_inc), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

void put_n(CUdeviceptr x, size_t n, uint32_t seed) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = seed * 1000003u + static_cast<uint32_t>(i);
  CK(cuMemcpyHtoD(x, v.data(), n * 4));
}

bool same(const std::vector<uint32_t>& v, uint32_t seed, uint32_t plus) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != seed * 1000003u + static_cast<uint32_t>(i) + plus) return false;
  }
  return true;
}

bool holds_n(CUdeviceptr x, size_t n, uint32_t seed, uint32_t plus) {
  std::vector<uint32_t> v(n);
  CK(cuMemcpyDtoH(v.data(), x, n * 4));
  return same(v, seed, plus);
}

unsigned long long mib(unsigned long long b) { return b / MiB; }

}  // namespace

int main(int argc, char** argv) {
  bool lazy = false;
  for (int i = 1; i < argc; ++i) lazy = lazy || std::strcmp(argv[i], "lazy") == 0;
  preload::use_device0();
  declare_kernels();
  CUstream st = nullptr;
  CK(cuStreamCreate(&st, 0));
  CUdeviceptr a1 = 0, a2 = 0, x = 0, y = 0;
  CK(cuMemAlloc(&a1, 2 * MiB));
  CK(cuMemAlloc(&a2, 2 * MiB));
  CHECK(a2 == a1 + 2 * MiB && a1 % (4 * MiB) == 0);  // one chunk, a1 its first piece
  CK(cuMemAlloc(&x, 4 * MiB));
  CK(cuMemAlloc(&y, 4 * MiB));
  put_n(a1, kHalf, 1);
  put_n(a2, kHalf, 2);
  put(x, 3);
  put(y, 4);
  // Chunks written in turn in a room of two, each back every 24 launches (no ping-pong stop, which
  // would leave them on the host): after the first window of copies in, kept copies stop paying.
  constexpr int kFill = 24, kPasses = 11;
  std::vector<CUdeviceptr> f(kFill);
  for (int i = 0; i < kFill; ++i) {
    CK(cuMemAlloc(&f[i], 4 * MiB));
    put(f[i], 10 + i);
  }
  for (int p = 0; p < kPasses; ++p) {
    for (int i = 0; i < kFill; ++i) CK(inc(f[i], st));
  }
  auto step = [&](const char* what, CUdeviceptr p, size_t n, unsigned long long want_mib) {
    const unsigned long long before = fake_cuda_dtod_async_bytes();
    CK(inc_n(p, n, st));
    const unsigned long long got = mib(fake_cuda_dtod_async_bytes() - before);
    if (got != want_mib) {
      std::fprintf(stderr, "%s: %llu MiB copied, expected %llu\n", what, got, want_mib);
      std::exit(1);
    }
  };
  // The least recently used chunk leaves for each that comes back; x and y are used whole.
  step("x in, a filler out", x, kWords, 4 + 4);
  step("y in, a filler out", y, kWords, 4 + 4);
  // A comes back for a1: its first piece alone.
  step("A in for a1, x out", a1, kHalf, lazy ? 2 + 4 : 4 + 4);
  step("y stays", y, kWords, 0);
  // A leaves with the one piece it holds.
  step("x in, A out", x, kWords, lazy ? 4 + 2 : 4 + 4);
  step("A in for a1, y out", a1, kHalf, lazy ? 2 + 4 : 4 + 4);
  // a2's piece when its launch comes.
  step("a2 with A in", a2, kHalf, lazy ? 2 : 0);
  step("x stays", x, kWords, 0);
  // A leaves whole: both pieces are in.
  step("y in, A out", y, kWords, 4 + 4);
  // A filler takes A's old device memory, so that A comes back in other memory: a piece not
  // copied in holds nothing of A's there.
  step("a filler in, x out", f[0], kWords, 4 + 4);
  step("A in for a1, y out", a1, kHalf, lazy ? 2 + 4 : 4 + 4);
  // Work no scan sees (a 2D copy) reads a2: every piece is brought in first.
  std::vector<uint32_t> v(kHalf);
  CUDA_MEMCPY2D c = {};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = a2;
  c.srcPitch = 2 * MiB;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = v.data();
  c.dstPitch = 2 * MiB;
  c.WidthInBytes = 2 * MiB;
  c.Height = 1;
  CK(cuMemcpy2D(&c));
  CHECK(same(v, 2, 1));
  // a2 freed: its piece holds nothing live, and A leaves with a1's piece alone, lazy or whole.
  CK(cuMemFree(a2));
  step("y in, a filler out", y, kWords, 4 + 4);
  step("x in, A out without a2's piece", x, kWords, 4 + 2);
  CHECK(holds_n(a1, kHalf, 1, 3));
  CHECK(holds(x, 3, 4));
  CHECK(holds(y, 4, 4));
  for (int i = 0; i < kFill; ++i) {
    CHECK(holds(f[i], 10 + i, kPasses + (i == 0 ? 1 : 0)));
    CK(cuMemFree(f[i]));
  }
  CK(cuMemFree(a1));
  CK(cuMemFree(x));
  CK(cuMemFree(y));
  CK(cuStreamDestroy(st));
  std::printf("swap lazy ok\n");
  return 0;
}
