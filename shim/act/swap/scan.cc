#include "scan.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "act/config.h"
#include "act/quiet.h"
#include "core/log.h"
#include "core/options.h"
#include "fill.h"

namespace gms::act::swap {

using driver::call_real;

namespace {
std::atomic<uint64_t> g_scanned_transfers{0};
}  // namespace

Scan& scan() {
  static NoDestructor<Scan> s;
  return *s;
}

uint64_t unscanned_work() {
  const Stats& st = runtime_stats();
  return st.family(Family::memcpy).calls + st.family(Family::memset).calls + st.launches(LaunchKind::graph) +
         quiet::launches() - g_scanned_transfers.load(std::memory_order_relaxed);
}

CUresult wait_for_uses(const std::vector<Range*>& ranges) {
  Scan& sc = scan();
  const uint64_t unscanned = unscanned_work();
  if (unscanned != sc.unscanned_seen) {
    sc.unscanned_seen = unscanned;
    return sync_context();
  }
  Timed t(Timing::swap_wait_ns);
  for (Range* range : ranges) {
    for (Mark& m : range->marks.uses) {
      CUresult r = call_real(GMS_REAL(cuEventSynchronize), m.event);
      if (r != CUDA_SUCCESS) return r;
    }
  }
  return CUDA_SUCCESS;
}

// Any launch, transfer or work no scan sees between the end of its planning and its driver call
// and marks (queueing; a range's in_flight and unscanned_open lie within such windows) would
// otherwise run beside the round's copy out on the GPU, and what it writes there after the copy
// read the chunk would be lost. The waiter holds the residency lock, which new windows need: they
// drain. Queueing a launch takes microseconds, but a synchronous copy no scan sees holds its
// window for as long as it runs.
void wait_for_queueing(std::unique_lock<std::mutex>& lock) {
  Scan& sc = scan();
  auto busy = [&] { return sc.queueing > 0; };
  if (!busy()) return;
  Timed t(Timing::swap_wait_ns);
  constexpr int kSlice = 2, kGiveUp = 60;  // seconds
  for (int waited = 0; !sc.queued.wait_for(lock, std::chrono::seconds(kSlice), [&] { return !busy(); });) {
    waited += kSlice;
    if (waited < kGiveUp) continue;
    if (!sc.queueing_stuck_said) {
      sc.queueing_stuck_said = true;
      log(LogLevel::warn, Line().str("swap: another thread's work on movable memory was still being queued after ")
                              .i64(kGiveUp).str(" s; moving the memory without waiting for it (its data may be stale)"));
    }
    return;
  }
}

void map_parked(std::vector<uintptr_t>& bases) {
  Slabs& s = slabs();
  std::sort(bases.begin(), bases.end());
  std::vector<Piece> run;
  std::vector<Range*> ranges;
  auto flush = [&] {
    if (run.empty()) return;
    CUresult r = map_span(run, ranges.front()->dev);
    if (r != CUDA_SUCCESS) r = map_span(run, ranges.front()->dev);  // once more: map_span undid its part
    if (r == CUDA_SUCCESS) {
      for (Range* range : ranges) set_parked(range->chunk, false);
    } else {
      Line l;
      l.str("swap: could not map ").bytes(run.size() * run.front().size).str(" of host memory at ").hex(run.front().va)
          .str(" (CUresult ").i64(r).str("): a kernel that uses it will fault");
      log(LogLevel::error, l);
    }
    run.clear();
    ranges.clear();
  };
  for (uintptr_t base : bases) {
    auto it = s.ranges.find(base);
    if (it == s.ranges.end() || !it->second.chunk.parked) continue;
    Range& range = it->second;
    if (!run.empty() && (run.back().va + run.back().size != base || ranges.back()->dev != range.dev)) flush();
    run.push_back({static_cast<CUdeviceptr>(base), range.size, range.chunk.host.handle});
    ranges.push_back(&range);
  }
  flush();
}

// --- The public face (act/swap.h) of this part ---

bool uses_over(uintptr_t chunk) {
  if (!scan_order()) return false;
  std::lock_guard lock(mu());
  Slabs& s = slabs();
  Scan& sc = scan();
  auto it = s.ranges.find(chunk);
  // Another thread's work that no scan sees may be under way (between finish_copies and its
  // mark): it may use the chunk.
  if (it == s.ranges.end() || !it->second.chunk.on_device() || it->second.marks.in_flight != 0 || sc.unscanned_open != 0 ||
      unscanned_work() != sc.unscanned_seen) {
    return false;
  }
  for (const Mark& m : it->second.marks.uses) {
    if (call_real(GMS_REAL(cuEventQuery), m.event) != CUDA_SUCCESS) return false;
  }
  return true;
}

void finish_copies() {
  if (!scan_order()) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  std::lock_guard lock(mu());
  ++scan().unscanned_open;
  fill_all();
  std::vector<uintptr_t> parked;
  for (auto& [base, range] : slabs().ranges) {
    if (range.chunk.parked) parked.push_back(base);
  }
  map_parked(parked);
  for (Mark* lasts : {marks().last_copies, marks().last_outs}) {
    for (int d = 0; d < kMaxDevices; ++d) host_wait(lasts[d]);
  }
}

void end_unscanned() {
  std::lock_guard lock(mu());
  Scan& sc = scan();
  if (sc.unscanned_open > 0) --sc.unscanned_open;
}

void unpark(uintptr_t addr) {
  if (parked_chunks() == 0) return;  // moves hold the lock across GPU waits
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  std::lock_guard lock(mu());
  if (!slabs().slab_of(addr)) return;
  std::vector<uintptr_t> bases{chunk_of(addr)};
  map_parked(bases);
}

CUresult read(void* dst, uintptr_t src, size_t n) {
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  std::lock_guard lock(mu());  // no round starts meanwhile
  CUstream st = marks().copy_stream(1);  // the copies in: the read comes after those under way
  if (!st) return CUDA_ERROR_NOT_READY;
  Slabs& s = slabs();
  // Every chunk the bytes lie in (a table read may cross into the next one).
  for (uintptr_t c = chunk_of(src); n != 0 && c < src + n; c += chunk_bytes()) {
    if (!s.slab_of(c)) continue;
    auto it = s.ranges.find(c);
    if (it == s.ranges.end()) continue;
    std::vector<uintptr_t> bases{it->first};
    map_parked(bases);
    fill(it->second, pieces_touched(c, it->second.size, src, src + n), true);
    if (it->second.marks.ready.event) call_real(GMS_REAL(cuStreamWaitEvent), st, it->second.marks.ready.event, 0u);
  }
  const CUresult r = call_real(GMS_REAL(cuMemcpyDtoHAsync_v2), dst, static_cast<CUdeviceptr>(src), n, st);
  return r == CUDA_SUCCESS ? driver::sync_stream(st, false) : r;
}

void begin_queue() {
  std::lock_guard lock(mu());
  ++scan().queueing;
}

void end_queue() {
  std::lock_guard lock(mu());
  Scan& sc = scan();
  if (sc.queueing > 0) --sc.queueing;
  sc.queued.notify_all();
}

void count_scanned_transfer() { g_scanned_transfers.fetch_add(1, std::memory_order_relaxed); }

void await_ready(const uintptr_t* bases, const uint32_t* pieces, size_t n, CUstream stream, bool per_thread) {
  if (n == 0) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  std::lock_guard lock(mu());
  Slabs& s = slabs();
  std::vector<uintptr_t> parked;  // left where they are, read over the link
  for (size_t k = 0; k < n; ++k) {
    const uintptr_t base = bases[k];
    auto it = s.ranges.find(base);
    if (it == s.ranges.end()) continue;
    ++it->second.marks.in_flight;  // until its mark
    if (it->second.chunk.parked) parked.push_back(base);
    fill(it->second, pieces ? pieces[k] : ~0u, !pieces);  // moves its ready mark after the copies
    if (!it->second.marks.ready.event) continue;
    Mark& ready = it->second.marks.ready;
    CUresult q = call_real(GMS_REAL(cuEventQuery), ready.event);
    if (q == CUDA_SUCCESS) {
      marks().give(ready);
    } else if (call_real(GMS_REAL(cuStreamWaitEvent), driver::stream_handle(stream, per_thread), ready.event, 0u) != CUDA_SUCCESS) {
      call_real(GMS_REAL(cuEventSynchronize), ready.event);
    }
  }
  map_parked(parked);
}

void mark_used(const uintptr_t* bases, size_t n, CUstream stream, bool per_thread, bool unmarked, bool launched) {
  constexpr size_t kMaxStreams = 4;  // per range; past it the oldest mark is waited for and reused
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  const CUstream handle = driver::stream_handle(stream, per_thread);
  Timed t(Timing::launch_scan_ns);  // the lock's wait included: part of each launch's cost
  std::lock_guard lock(mu());
  Slabs& s = slabs();
  if (launched && unmarked) scan().unscanned_seen = kUnmarked;
  for (size_t k = 0; k < n; ++k) {
    const uintptr_t base = bases[k];
    auto it = s.ranges.find(base);
    if (it == s.ranges.end()) continue;
    RangeMarks& rm = it->second.marks;
    if (rm.in_flight > 0) --rm.in_flight;
    if (!launched || unmarked) continue;
    std::vector<Mark>& uses = rm.uses;
    auto m = std::find_if(uses.begin(), uses.end(), [&](const Mark& u) { return u.stream == handle; });
    if (m == uses.end() && uses.size() >= kMaxStreams) {
      m = uses.begin();
      call_real(GMS_REAL(cuEventSynchronize), m->event);
    }
    if (m == uses.end()) {
      Mark fresh = marks().take();
      if (fresh.event) {
        uses.push_back(fresh);
        m = uses.end() - 1;
      }
    }
    if (m == uses.end() || !record(*m, handle)) {
      if (m != uses.end()) uses.erase(m);
      scan().unscanned_seen = kUnmarked;  // an unmarked use: the next round waits for the context
    }
  }
}

}  // namespace gms::act::swap
