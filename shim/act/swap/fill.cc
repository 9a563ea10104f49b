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

CUresult fill(Range& range, uint32_t mask) {
  Chunk& c = range.chunk;
  if (!c.lazy) return CUDA_SUCCESS;
  // The shim's streams are the current context's: another device's chunk is filled by its own
  // device's uses (a scan lists the chunks of the launch's device only).
  if (range.dev != driver::current_device()) return CUDA_ERROR_INVALID_CONTEXT;  // never lazy: lazy_allowed
  const uint32_t all = all_pieces(range.size), need = mask & all & ~c.valid;
  if (need == 0) return CUDA_SUCCESS;
  auto failed = [&](CUresult r) {
    Line l;
    l.str("swap: copying ").bytes(range.size).str(" back in piece by piece failed (CUresult ").i64(r)
        .str("): a kernel may read stale data there");
    log(LogLevel::error, l);
    return r;
  };
  Marks& mk = marks();
  CUstream in = mk.copy_stream(1);
  if (!in) return failed(CUDA_ERROR_NOT_READY);
  // After whatever last wrote its host memory or device memory: the round ordered the copies in
  // there, and a failed eviction's copy out moved the ready mark to the copies out.
  gpu_wait(range.marks.ready, in, false);
  CUresult r = CUDA_SUCCESS;
  uint64_t bytes = 0;
  // The runs of neighbouring pieces, one copy each.
  for (unsigned k = 0; k < sum::kMaxPieces && r == CUDA_SUCCESS;) {
    if (!(need >> k & 1)) {
      ++k;
      continue;
    }
    unsigned end = k;
    while (end < sum::kMaxPieces && (need >> end & 1)) ++end;
    const uint64_t from = uint64_t{k} * sum::kPiece, to = std::min<uint64_t>(range.size, uint64_t{end} * sum::kPiece);
    r = copy(c.device.side + from, c.host.side + from, to - from, in, false);
    if (r == CUDA_SUCCESS) {
      c.valid |= all_pieces(to) & ~all_pieces(from);
      bytes += to - from;
    }
    k = end;
  }
  if (bytes) runtime_stats().decision(Decision::swap_filled, bytes);
  // The use waits for the chunk's ready mark; work no scan sees for the last copies in.
  const int dev = range.dev;
  for (Mark* m : {&range.marks.ready, dev >= 0 && dev < kMaxDevices ? &mk.last_copies[dev] : nullptr}) {
    if (!m) continue;
    if (!m->event) *m = mk.take();
    if (!(m->event && record(*m, in)) && r == CUDA_SUCCESS) r = wait_stream(in, false);
  }
  if (r != CUDA_SUCCESS) return failed(r);
  backings().complete(c, range.size);
  return CUDA_SUCCESS;
}

// --- The public face (act/swap.h) of this part ---

uint32_t pieces_of(uintptr_t chunk, uintptr_t base, uint64_t size) {
  return pieces_touched(chunk, chunk_bytes(), base, base + size);
}

void fill_all() {
  const int dev = driver::current_device();
  for (auto& [base, range] : slabs().ranges) {
    if (range.chunk.lazy && range.dev == dev) fill(range, ~0u);
  }
}

}  // namespace gms::act::swap
