// CUDA arrays under a device budget, over the stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=16M
// and a managed cap of 64M; argv[1] is the policy the runner set, last on the command line.
// Checks:
// - an array counts against the budget from its creation to its destroy, at the size its shape
//   gives (cuMemGetInfo's free shrinks by it);
// - an array past the budget is refused with out-of-memory, as on a card of the budget's size
//   (under off too: the user set the limit), and the program keeps running;
// - under swap and auto, movable memory leaves for the host to make room for an array, and its
//   bytes are intact afterwards.
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

namespace {

constexpr size_t MiB = 1u << 20;

size_t free_now() { return preload::free_within(16 * MiB); }

// A 2D float array of `mib` MiB (1024 floats wide).
CUresult make_2d(CUarray* a, size_t mib) {
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = 1024;
  d.Height = mib * 256;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  return cuArrayCreate(a, &d);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string policy = argc > 1 ? argv[argc - 1] : "";
  preload::use_device0();

  const size_t free0 = free_now();
  CUarray a = nullptr, b = nullptr, c = nullptr;
  CK(make_2d(&a, 4));
  CHECK(free_now() == free0 - 4 * MiB);
  CUmipmappedArray m = nullptr;
  CUDA_ARRAY3D_DESCRIPTOR d3{};
  d3.Width = d3.Height = 512;
  d3.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  d3.NumChannels = 4;
  CK(cuMipmappedArrayCreate(&m, &d3, 2));  // 1 MiB and a quarter of it
  CHECK(free_now() == free0 - 4 * MiB - 1280 * 1024);
  CK(cuMipmappedArrayDestroy(m));
  CHECK(free_now() == free0 - 4 * MiB);

  // 4 of 16 MiB taken. Under swap and auto, 8 MiB of movable memory (written) leave 4 MiB; an
  // array of 8 MiB then needs 4 MiB of it to leave for the host. Under spill and off it fits.
  const bool moves = policy == "swap" || policy == "auto";
  std::vector<CUdeviceptr> movable;
  std::vector<unsigned char> in(4 * MiB), out(4 * MiB);
  if (moves) {
    for (int k = 0; k < 2; ++k) {
      CUdeviceptr p = 0;
      CK(cuMemAlloc(&p, 4 * MiB));
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7 + k);
      CK(cuMemcpyHtoD(p, in.data(), in.size()));
      movable.push_back(p);
    }
  }
  CK(make_2d(&b, 8));
  // Past the budget whatever moves: 16 MiB more while 12 MiB of arrays are there.
  CHECK(make_2d(&c, 16) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(c == nullptr);
  CK(cuArrayDestroy(b));
  // Read back after the room is free again: the evictions the runner counts were the arrays'.
  for (size_t k = 0; k < movable.size(); ++k) {
    CK(cuMemcpyDtoH(out.data(), movable[k], out.size()));
    for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == static_cast<unsigned char>(i * 7 + k));
  }
  CK(cuArrayDestroy(a));
  for (CUdeviceptr p : movable) CK(cuMemFree(p));
  CHECK(free_now() == free0);
  std::printf("arrays ok (%s)\n", policy.c_str());
  return 0;
}
