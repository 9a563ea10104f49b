// Movable memory that has not moved yet (act/quiet.h), over the stand-in driver. Run with
// GPUMEMSHIM_DEVICE_LIMIT=12M, GPUMEMSHIM_SWAP_CHUNK=4M (three chunks) and GPUMEMSHIM_SWAP_ORDER=scan.
// While a, b and c fit, their launches and copies are neither marked nor waited for. The fourth
// range, d, needs room: the round that evicts a (least recently made) waits for the whole
// context, once, since no mark says what the quiet launches used; from then on launches are marked
// and a round waits for marks. With the argument `off` (GPUMEMSHIM_SWAP_QUIET=off) every launch is
// marked from the start and no round waits for the context. Every byte is checked at the end.
#include "swap_common.h"

using namespace swap_test;

int main(int argc, char** argv) {
  preload::use_device0();
  declare_kernels();
  const bool quiet = !preload::has_arg(argc, argv, "off");
  CUstream st;
  CK(cuStreamCreate(&st, 0));
  CUdeviceptr a = 0, b = 0, c = 0, d = 0;
  CK(cuMemAlloc(&a, 4 * MiB));
  CK(cuMemAlloc(&b, 4 * MiB));
  CK(cuMemAlloc(&c, 4 * MiB));
  put(a, 1);  // (a synchronous copy stages through pinned memory, with events of its own)
  put(b, 2);
  put(c, 3);
  {
    Count record("cuEventRecord"), query("cuEventQuery");
    for (int k = 0; k < 5; ++k) {
      CK(inc(a, st));
      CK(inc(b, st));
      CK(inc(c, st));
    }
    // Quiet: nothing recorded or asked per launch. Off: one mark a launch at least.
    CHECK(quiet ? record.added() == 0 && query.added() == 0 : record.added() >= 15);
  }
  {
    Count sync("cuCtxSynchronize"), copy("cuMemcpyDtoDAsync_v2");
    CK(cuMemAlloc(&d, 4 * MiB));  // room: a goes out
    CHECK(copy.added() >= 1);     // the eviction's copy out
    CHECK(sync.added() == (quiet ? 1u : 0u));
    CHECK(last("cuCtxSynchronize") < last("cuMemcpyDtoDAsync_v2") || !quiet);
  }
  put(d, 4);
  {
    // Stirred: marked like any launch, and a comes back for its launch after b's marks.
    Count record("cuEventRecord"), sync("cuCtxSynchronize");
    CK(inc(d, st));
    CK(inc(a, st));
    CHECK(record.added() >= 2);
    CHECK(sync.added() == 0);
  }
  CK(cuStreamSynchronize(st));
  CHECK(holds(a, 1, 6) && holds(b, 2, 5) && holds(c, 3, 5) && holds(d, 4, 1));
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  CK(cuMemFree(c));
  CK(cuMemFree(d));
  std::puts(quiet ? "swap quiet ok" : "swap quiet off ok");
  return 0;
}
