#include "fill.h"

#include "core/log.h"
#include "core/options.h"
#include "sum_mix.h"

namespace gms::act::swap {

using driver::call_real;

bool lazy_allowed() {
  static int devices = -1;  // under mu()
  if (!options().swap_lazy.value) return false;
  if (devices < 0 && call_real(GMS_REAL(cuDeviceGetCount), &devices) != CUDA_SUCCESS) devices = 0;
  return devices == 1;
}

CUresult fill(Range& range, uint32_t mask, bool whole) {
  Chunk& c = range.chunk;
  if (!c.lazy()) return CUDA_SUCCESS;
  const uint32_t need = mask & all_pieces(range.size) & ~c.valid;
  if (need == 0) return CUDA_SUCCESS;
  auto failed = [&](CUresult r) {
    Line l;
    l.str("swap: copying ").bytes(range.size).str(" back in piece by piece failed (CUresult ").i64(r)
        .str("): a kernel may read stale data there");
    log(LogLevel::error, l);
    return r;
  };
  // One GPU (lazy_allowed): the current context's streams and events are the chunk's device's.
  Marks& mk = marks();
  CUstream in = mk.copy_stream(1);
  if (!in) return failed(CUDA_ERROR_NOT_READY);
  // After whatever last wrote its host memory or device memory: the round ordered the copies in
  // there, and a failed eviction's copy out moved the ready mark to the copies out.
  gpu_wait(range.marks.ready, in, false);
  CUresult r = CUDA_SUCCESS;
  uint64_t bytes = 0;
  each_run(need, range.size, [&](uint64_t from, uint64_t to) {
    r = copy(c.device.side + from, c.host.side + from, to - from, in, false);
    if (r != CUDA_SUCCESS) return false;
    c.valid |= all_pieces(to) & ~all_pieces(from);
    bytes += to - from;
    return true;
  });
  if (bytes) runtime_stats().decision(Decision::swap_filled, bytes);
  if (bytes && whole) runtime_stats().decision(Decision::swap_filled_whole, bytes);
  // The use waits for the chunk's ready mark; work no scan sees for the last copies in.
  for (Mark* m : {&range.marks.ready, &mk.last_copies[range.dev]}) {
    if (!mark_end(*m, in) && r == CUDA_SUCCESS) r = wait_stream(in, false);
  }
  if (r != CUDA_SUCCESS) return failed(r);
  backings().complete(c, range.size);
  return CUDA_SUCCESS;
}

void fill_all() {
  // What no live allocation covers, no work reads; a chunk that is not lazy has nothing to fill.
  for (auto& [base, range] : slabs().ranges) {
    if (range.chunk.lazy()) fill(range, live_pieces(base), true);
  }
}

}  // namespace gms::act::swap
