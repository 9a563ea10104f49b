#include "swap.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/guard.h"
#include "core/ledger.h"
#include "core/log.h"
#include "core/options.h"
#include "core/runtime.h"
#include "entry/common.h"
#include "policy/residency.h"
#include "trace/trace.h"

namespace gms::act::swap {
namespace {

using entry::call_real;

constexpr uint64_t kGranule = 2ull << 20;  // cuMemCreate's granularity on every current GPU

uint64_t round_up(uint64_t n) { return (n + kGranule - 1) / kGranule * kGranule; }

// Memory behind one chunk, device or pinned host, with a range of its own (side) where the shim's
// copies reach it. Copies never go through the program's range, so remapping that range never
// waits for them: only for the kernels that use it. Host memory is mapped there when made; device
// memory when first copied (most of it never moves). Host chunks are kept for reuse: making them
// costs about 200 ms per GiB on the H100, mapping them 13 ms per GiB.
struct Backing {
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr side = 0;
  uint64_t size = 0;
  int dev = 0;  // the side range is mapped for this device only
};

struct Chunk {
  Backing device;  // handle nonzero: backed by the device
  Backing host;    // else by this
  // Scan order: host-backed but not mapped in the program's range until something the shim sees
  // uses it (map_parked). Mapping host memory there costs 13 to 20 ms per GiB, unmapping it again
  // 5 more, and most evicted chunks are brought back before anything reads them over the link.
  bool parked = false;
  bool on_device() const { return device.handle != 0; }
};

// An event and the device of the context it was made in (its pool).
struct Mark {
  CUevent event = nullptr;
  CUstream stream = nullptr;  // where it was last recorded (for a launch's use)
  int dev = 0;
};

struct Range {
  uint64_t size = 0;  // reserved bytes (rounded up)
  int dev = 0;
  std::vector<Chunk> chunks;
  // GPUMEMSHIM_SWAP_ORDER=scan: the last launch on each stream that the scan saw use the range,
  // and the copies in that launches must wait for. A move waits for these instead of the context.
  std::vector<Mark> uses;
  Mark ready;
  // Launches and transfers between their await_ready and their mark: another thread's round must
  // not park the range under them (they would fault, not read the host copy).
  int in_flight = 0;
  uint64_t offset_of(size_t i) const { return i * chunk_bytes(); }
  uint64_t size_of(size_t i) const { return std::min(chunk_bytes(), size - offset_of(i)); }
  // Device memory behind the range: what it takes from the budget.
  uint64_t device_bytes() const {
    uint64_t n = 0;
    for (size_t i = 0; i < chunks.size(); ++i) n += chunks[i].on_device() ? size_of(i) : 0;
    return n;
  }
  // The device-backed prefix (the planner evicts from the end, so normally all of it): what the
  // planner counts as resident.
  uint64_t resident_prefix() const {
    uint64_t n = 0;
    for (size_t i = 0; i < chunks.size() && chunks[i].on_device(); ++i) n += size_of(i);
    return n;
  }
};

// A range the program freed, kept mapped for reuse.
struct Retired {
  uintptr_t base = 0;
  Range range;
  Mark freed;  // recorded by a stream-ordered free; no event: nothing left to wait for
};

constexpr int kMaxDevices = DeviceLedger::kMaxDevices;

struct State {
  std::mutex mu;  // guards everything below; held across moves (they are synchronous anyway)
  std::unordered_map<uintptr_t, Range> ranges;
  std::multimap<std::pair<int, uint64_t>, Backing> spare;  // host chunks, by device and size
  std::deque<Retired> retired;               // oldest first
  uint64_t retired_device[kMaxDevices] = {};
  uint64_t retired_total[kMaxDevices] = {};
  std::vector<CUevent> events[kMaxDevices];  // idle events, by the device of their context
  // GPUMEMSHIM_SWAP_ORDER=scan: the shim's own streams for copies out and in, by context device;
  // host chunks that copies in still read and device memory that copies out still read, each
  // batch with the event that ends them; the end of the last round's copies; and the count of
  // copies, memsets and graph launches (work the scan cannot see) at the last round.
  CUstream copy_streams[kMaxDevices][2] = {};
  struct Pending {
    Mark done;
    std::vector<Backing> hosts;    // back to the spares
    std::vector<Backing> devices;  // released
  };
  std::deque<Pending> pending;
  Mark copies[kMaxDevices];  // by context device
  int unscanned_open = 0;     // work no scan sees, between finish_copies and end_unscanned
  uint64_t unscanned_seen = 0;
};
constexpr uint64_t kUnmarked = ~uint64_t{0};

State& state() {
  static NoDestructor<State> s;
  return *s;
}

// Adds the time from construction to destruction to a statistic.
class Timed {
 public:
  explicit Timed(Timing t) : t_(t), t0_(trace::monotonic_ns()) {}
  ~Timed() { runtime_stats().time(t_, trace::monotonic_ns() - t0_); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  Timing t_;
  uint64_t t0_;
};

CUresult sync_context() {
  Timed t(Timing::swap_wait_ns);
  return call_real(GMS_REAL(cuCtxSynchronize));
}

CUresult wait_stream(CUstream stream, bool per_thread) {
  Timed t(Timing::swap_wait_ns);
  return entry::sync_stream(stream, per_thread);
}

CUmemAllocationProp prop(bool host, int dev) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = host ? 0 : dev;
  return p;
}

CUresult allow_device(CUdeviceptr va, uint64_t size, int dev) {
  CUmemAccessDesc d{};
  d.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return call_real(GMS_REAL(cuMemSetAccess), va, static_cast<size_t>(size), &d, size_t{1});
}

// One chunk's worth of a mapping: `handle` over [va, va + size).
struct Piece {
  CUdeviceptr va;
  uint64_t size;
  CUmemGenericAllocationHandle handle;
};

// Maps the pieces, which lie back to back from pieces[0].va and are unmapped, and gives the device
// access to all of them with one call: the driver charges host memory per call
// (tests/gpu/placement/vmm_moves.cu: 1 GiB of host chunks in 50.8 ms chunk by chunk, 19.6 ms at
// once, on the H100). On failure nothing of it stays mapped.
CUresult map_span(const std::vector<Piece>& pieces, int dev) {
  CUresult r = CUDA_SUCCESS;
  size_t mapped = 0;
  uint64_t total = 0;
  for (const Piece& p : pieces) {
    r = call_real(GMS_REAL(cuMemMap), p.va, static_cast<size_t>(p.size), size_t{0}, p.handle, 0ull);
    if (r != CUDA_SUCCESS) break;
    ++mapped;
    total += p.size;
  }
  if (r == CUDA_SUCCESS && total != 0) r = allow_device(pieces[0].va, total, dev);
  if (r != CUDA_SUCCESS) {
    for (size_t k = 0; k < mapped; ++k) call_real(GMS_REAL(cuMemUnmap), pieces[k].va, static_cast<size_t>(pieces[k].size));
  }
  return r;
}

CUresult map(CUdeviceptr va, uint64_t size, CUmemGenericAllocationHandle handle, int dev) {
  return map_span({Piece{va, size, handle}}, dev);
}

// An idle event of the current context's pool, or a new one; null when there is none.
Mark take_event(State& s) {
  Mark m;
  m.dev = entry::current_device();
  if (m.dev < 0 || m.dev >= kMaxDevices) return {};
  auto& pool = s.events[m.dev];
  if (!pool.empty()) {
    m.event = pool.back();
    pool.pop_back();
  } else if (call_real(GMS_REAL(cuEventCreate), &m.event, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
    m.event = nullptr;
  }
  return m;
}

void give_event(State& s, Mark& m) {
  if (m.event) s.events[m.dev].push_back(m.event);
  m = {};
}

// Records a mark on `stream`; a failed record destroys the event (it may be broken).
bool record(Mark& m, CUstream stream) {
  m.stream = stream;
  if (call_real(GMS_REAL(cuEventRecord), m.event, stream) == CUDA_SUCCESS) return true;
  call_real(GMS_REAL(cuEventDestroy_v2), m.event);
  m = {};
  return false;
}

void drop_marks(State& s, Range& range) {
  for (Mark& m : range.uses) give_event(s, m);
  range.uses.clear();
  give_event(s, range.ready);
}

void drop_backing(const Backing& b) {
  if (b.side) {
    call_real(GMS_REAL(cuMemUnmap), b.side, static_cast<size_t>(b.size));
    call_real(GMS_REAL(cuMemAddressFree), b.side, static_cast<size_t>(b.size));
  }
  call_real(GMS_REAL(cuMemRelease), b.handle);
}

void give_host(State& s, const Backing& h) { s.spare.emplace(std::pair{h.dev, h.size}, h); }

// Batches whose copies are over: host chunks go back to the spares, device memory is released;
// with `all`, after waiting for them; with `until`, only until a spare of that device and size is
// back.
void reap(State& s, bool all, const std::pair<int, uint64_t>* until = nullptr) {
  while (!s.pending.empty() && !(until && s.spare.count(*until))) {
    State::Pending& p = s.pending.front();
    if (p.done.event) {
      CUresult r = all ? call_real(GMS_REAL(cuEventSynchronize), p.done.event) : call_real(GMS_REAL(cuEventQuery), p.done.event);
      if (r == CUDA_ERROR_NOT_READY) return;
      // Any other error: the context is broken, nothing more will read them.
    }
    for (const Backing& h : p.hosts) give_host(s, h);
    for (const Backing& d : p.devices) drop_backing(d);
    give_event(s, p.done);
    s.pending.pop_front();
  }
}

// Maps a chunk's memory at a side range of its own, if it has none yet.
CUresult give_side(Backing& b) {
  if (b.side) return CUDA_SUCCESS;
  CUresult r = call_real(GMS_REAL(cuMemAddressReserve), &b.side, static_cast<size_t>(b.size), size_t{0}, CUdeviceptr{0}, 0ull);
  if (r != CUDA_SUCCESS) {
    b.side = 0;
    return r;
  }
  r = map(b.side, b.size, b.handle, b.dev);
  if (r != CUDA_SUCCESS) {
    call_real(GMS_REAL(cuMemAddressFree), b.side, static_cast<size_t>(b.size));
    b.side = 0;
  }
  return r;
}

// New memory for one chunk, without a side range. Caller holds s.mu.
CUresult make_backing(uint64_t size, int dev, bool host, Backing* out) {
  Backing b;
  b.size = size;
  b.dev = dev;
  CUmemAllocationProp p = prop(host, dev);
  CUresult r = call_real(GMS_REAL(cuMemCreate), &b.handle, static_cast<size_t>(size), &p, 0ull);
  if (r == CUDA_SUCCESS) *out = b;
  return r;
}

// Caller holds s.mu.
CUresult take_host(State& s, uint64_t size, int dev, Backing* out) {
  const std::pair<int, uint64_t> key{dev, size};
  auto it = s.spare.find(key);
  if (it == s.spare.end() && !s.pending.empty()) {
    // Waiting for copies, oldest first, is cheaper than making host memory (200 ms per GiB).
    Timed t(Timing::swap_wait_ns);
    reap(s, true, &key);
    it = s.spare.find(key);
  }
  if (it != s.spare.end()) {
    *out = it->second;
    s.spare.erase(it);
    return CUDA_SUCCESS;
  }
  Backing h;
  CUresult r = make_backing(size, dev, true, &h);
  if (r == CUDA_SUCCESS && (r = give_side(h)) != CUDA_SUCCESS) call_real(GMS_REAL(cuMemRelease), h.handle);
  if (r == CUDA_SUCCESS) *out = h;
  return r;
}

// Releases a chunk's backing; the program's range must already be unmapped there.
void release(State& s, Chunk& c) {
  if (c.on_device()) {
    drop_backing(c.device);
    c.device = {};
  } else if (c.host.handle) {
    give_host(s, c.host);
    c.host = {};
  }
}

// Unmaps and releases everything behind a range nothing uses any more.
CUresult destroy(State& s, uintptr_t base, Range& range) {
  CUresult first = CUDA_SUCCESS;
  for (size_t i = 0; i < range.chunks.size(); ++i) {
    CUresult r = range.chunks[i].parked ? CUDA_SUCCESS
                                        : call_real(GMS_REAL(cuMemUnmap), static_cast<CUdeviceptr>(base + range.offset_of(i)),
                                                    static_cast<size_t>(range.size_of(i)));
    if (r == CUDA_SUCCESS) release(s, range.chunks[i]);  // else leak it rather than reuse mapped memory
    if (first == CUDA_SUCCESS) first = r;
  }
  CUresult r = call_real(GMS_REAL(cuMemAddressFree), static_cast<CUdeviceptr>(base), static_cast<size_t>(range.size));
  return first == CUDA_SUCCESS ? r : first;
}

// Waits for a retired range's free, if it was stream-ordered, and gives its event back.
void settle(State& s, Retired& t) {
  if (!t.freed.event) return;
  call_real(GMS_REAL(cuEventSynchronize), t.freed.event);
  give_event(s, t.freed);
}

// Caller holds s.mu. Removes retired range k from the list and its tallies.
Retired take_retired(State& s, size_t k) {
  Retired t = std::move(s.retired[k]);
  s.retired.erase(s.retired.begin() + static_cast<std::ptrdiff_t>(k));
  s.retired_device[t.range.dev] -= t.range.device_bytes();
  s.retired_total[t.range.dev] -= t.range.size;
  return t;
}

void release_one(State& s, size_t k) {
  Retired t = take_retired(s, k);
  settle(s, t);
  destroy(s, t.base, t.range);
}

// Caller holds s.mu.
void release_all(State& s) {
  while (!s.retired.empty()) release_one(s, 0);
  reap(s, true);
  for (auto& [key, h] : s.spare) drop_backing(h);
  s.spare.clear();
  for (Mark& m : s.copies) give_event(s, m);
  for (auto& pool : s.events) {
    for (CUevent e : pool) call_real(GMS_REAL(cuEventDestroy_v2), e);
    pool.clear();
  }
}

CUresult copy(CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream stream, bool per_thread) {
  return per_thread ? call_real(GMS_REAL(cuMemcpyDtoDAsync_v2_ptsz), dst, src, static_cast<size_t>(n), stream)
                    : call_real(GMS_REAL(cuMemcpyDtoDAsync_v2), dst, src, static_cast<size_t>(n), stream);
}

void say(const char* what, CUresult r, uint64_t bytes) {
  Line l;
  l.str("swap: ").str(what).str(" of ").bytes(bytes).str(" failed (CUresult ").i64(r).str("): the data stays where it was");
  log(LogLevel::warn, l);
}

void say_lost(uint64_t size, CUdeviceptr va) {
  Line l;
  l.str("swap: could not map ").bytes(size).str(" back at ").hex(va).str(": that part of the range is gone");
  log(LogLevel::error, l);
}

std::atomic<uint64_t> g_scanned_transfers{0};

// Copies, memsets and graph launches so far whose memory no scan saw.
uint64_t unscanned_work() {
  const Stats& st = runtime_stats();
  return st.family(Family::memcpy).calls + st.family(Family::memset).calls + st.launches(LaunchKind::graph) -
         g_scanned_transfers.load(std::memory_order_relaxed);
}

// The shim's own stream for copies out (0) or in (1) in the current context; null if none.
CUstream copy_stream(State& s, int which) {
  const int dev = entry::current_device();
  if (dev < 0 || dev >= kMaxDevices) return nullptr;
  CUstream& st = s.copy_streams[dev][which];
  if (!st && call_real(GMS_REAL(cuStreamCreate), &st, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) st = nullptr;
  return st;
}

// Scan order: waits until no launch the scan saw can still use `ranges`, or for the whole context
// when work the scan cannot see was queued since the last round. The shim's own copies of them
// are not waited for here: they reach the memory through side ranges, so they do not mind a remap
// of the program's range, and the copies that need them done wait for them on the GPU.
CUresult wait_for_uses(State& s, const std::vector<Range*>& ranges) {
  const uint64_t unscanned = unscanned_work();
  if (unscanned != s.unscanned_seen) {
    s.unscanned_seen = unscanned;
    return sync_context();
  }
  Timed t(Timing::swap_wait_ns);
  for (Range* range : ranges) {
    for (Mark& m : range->uses) {
      CUresult r = call_real(GMS_REAL(cuEventSynchronize), m.event);
      if (r != CUDA_SUCCESS) return r;
    }
  }
  return CUDA_SUCCESS;
}

// Work on `stream` (per_thread: the per-thread default) waits on the GPU for `m`, or here when
// the driver will not queue the wait.
void gpu_wait(const Mark& m, CUstream stream, bool per_thread) {
  if (!m.event) return;
  if (call_real(GMS_REAL(cuStreamWaitEvent), entry::stream_handle(stream, per_thread), m.event, 0u) != CUDA_SUCCESS) {
    Timed t(Timing::swap_wait_ns);
    call_real(GMS_REAL(cuEventSynchronize), m.event);
  }
}

// Maps the host memory of the range's parked chunks into it, in runs of neighbours. A chunk that
// cannot be mapped stays parked: a kernel that reaches it faults.
void map_parked(uintptr_t base, Range& range) {
  std::vector<Piece> run;
  std::vector<Chunk*> chunks;
  auto flush = [&] {
    if (run.empty()) return;
    CUresult r = map_span(run, range.dev);
    if (r == CUDA_SUCCESS) {
      for (Chunk* c : chunks) c->parked = false;
    } else {
      uint64_t n = 0;
      for (const Piece& p : run) n += p.size;
      Line l;
      l.str("swap: could not map ").bytes(n).str(" of host memory at ").hex(run.front().va).str(" (CUresult ").i64(r)
          .str("): a kernel that uses it will fault");
      log(LogLevel::error, l);
    }
    run.clear();
    chunks.clear();
  };
  for (size_t i = 0; i < range.chunks.size(); ++i) {
    Chunk& c = range.chunks[i];
    if (!c.parked) {
      flush();
      continue;
    }
    run.push_back({static_cast<CUdeviceptr>(base + range.offset_of(i)), range.size_of(i), c.host.handle});
    chunks.push_back(&c);
  }
  flush();
}

bool any_parked(const Range& range) {
  return std::any_of(range.chunks.begin(), range.chunks.end(), [](const Chunk& c) { return c.parked; });
}

}  // namespace

uint64_t chunk_bytes() { return policy::ResidencyConfig{}.chunk_bytes; }
uint64_t reserved_bytes(uint64_t bytes) { return round_up(bytes == 0 ? 1 : bytes); }

bool reuse(CUdeviceptr* out, uint64_t bytes, int dev, const Use& use, uint64_t* size, uint64_t* resident) {
  if (dev < 0 || dev >= kMaxDevices) return false;
  ShimScope scope;
  entry::RelaxedCapture relaxed;
  Timed timed(Timing::swap_create_ns);
  State& s = state();
  const uint64_t need = reserved_bytes(bytes);
  std::lock_guard lock(s.mu);
  size_t best = s.retired.size();
  for (size_t k = 0; k < s.retired.size(); ++k) {
    const Range& range = s.retired[k].range;
    if (range.dev != dev || range.size < need || range.size - need > std::max(need / 4, kGranule)) continue;
    if (best == s.retired.size() || range.size < s.retired[best].range.size) best = k;  // oldest of the best
  }
  if (best == s.retired.size()) return false;
  Retired t = take_retired(s, best);
  // A stream-ordered use waits for the free on the GPU, even on what looks like the same stream:
  // the per-thread default stream is one per thread, and a destroyed stream's handle comes back.
  if (t.freed.event && use.stream_ordered &&
      call_real(GMS_REAL(cuStreamWaitEvent), entry::stream_handle(use.stream, use.per_thread), t.freed.event, 0u) == CUDA_SUCCESS) {
    give_event(s, t.freed);
  }
  settle(s, t);
  *size = t.range.size;
  *resident = t.range.resident_prefix();
  *out = static_cast<CUdeviceptr>(t.base);
  runtime_stats().decision(Decision::swap_reused, t.range.size);
  s.ranges.emplace(t.base, std::move(t.range));
  return true;
}

CUresult create(CUdeviceptr* out, uint64_t bytes, int dev, bool on_device) {
  ShimScope scope;
  entry::RelaxedCapture relaxed;
  Timed timed(Timing::swap_create_ns);
  State& s = state();
  Range range;
  range.size = reserved_bytes(bytes);
  range.dev = dev;
  CUdeviceptr va = 0;
  CUresult r = call_real(GMS_REAL(cuMemAddressReserve), &va, static_cast<size_t>(range.size), size_t{0}, CUdeviceptr{0}, 0ull);
  if (r != CUDA_SUCCESS) return r;
  size_t n = (range.size + chunk_bytes() - 1) / chunk_bytes();
  range.chunks.resize(n);
  std::lock_guard lock(s.mu);
  std::vector<Piece> pieces;
  for (size_t i = 0; i < n && r == CUDA_SUCCESS; ++i) {
    Chunk& c = range.chunks[i];
    uint64_t size = range.size_of(i);
    r = on_device ? make_backing(size, dev, false, &c.device) : take_host(s, size, dev, &c.host);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && on_device && !s.pending.empty()) {
      reap(s, true);  // evicted device memory still being copied out is released after its copy
      r = make_backing(size, dev, false, &c.device);
    }
    if (r == CUDA_SUCCESS) pieces.push_back({va + range.offset_of(i), size, on_device ? c.device.handle : c.host.handle});
  }
  if (r == CUDA_SUCCESS) r = map_span(pieces, dev);
  if (r != CUDA_SUCCESS) {
    for (Chunk& c : range.chunks) release(s, c);
    call_real(GMS_REAL(cuMemAddressFree), va, static_cast<size_t>(range.size));
    return r;
  }
  s.ranges.emplace(static_cast<uintptr_t>(va), std::move(range));
  *out = va;
  return CUDA_SUCCESS;
}

CUresult retire(uintptr_t base, const Use& use, uint64_t keep) {
  ShimScope scope;
  entry::RelaxedCapture relaxed;
  Timed timed(Timing::swap_free_ns);
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.ranges.find(base);
  if (it == s.ranges.end()) return CUDA_ERROR_INVALID_VALUE;
  Retired t;
  t.base = base;
  const int dev = it->second.dev;
  CUresult r = CUDA_SUCCESS;
  if (use.stream_ordered) {
    // Work queued on the stream before the free may still use the range, and the shim's copies of
    // it may still run: the event marks the end of both.
    gpu_wait(it->second.ready, use.stream, use.per_thread);
    Mark e = take_event(s);
    if (!e.event || !record(e, entry::stream_handle(use.stream, use.per_thread))) r = wait_stream(use.stream, use.per_thread);
    t.freed = e;
  } else {
    // Movable memory gets remapped when reused or released: under a queued kernel (on any stream)
    // that would fault.
    r = sync_context();
  }
  if (r != CUDA_SUCCESS) {
    give_event(s, t.freed);
    return r;  // the program keeps it: nothing is known to be safe
  }
  t.range = std::move(it->second);
  drop_marks(s, t.range);  // the free is ordered after its uses
  t.range.in_flight = 0;
  s.ranges.erase(it);
  s.retired_device[dev] += t.range.device_bytes();
  s.retired_total[dev] += t.range.size;
  s.retired.push_back(std::move(t));
  if (s.ranges.empty()) {
    // The program holds no movable memory any more: what was kept for it goes back too.
    release_all(s);
    return CUDA_SUCCESS;
  }
  for (size_t k = 0; k < s.retired.size() && s.retired_total[dev] > keep;) {
    if (s.retired[k].range.dev == dev) {
      release_one(s, k);
    } else {
      ++k;
    }
  }
  return CUDA_SUCCESS;
}

uint64_t retired_device_bytes(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.retired_device[dev];
}

void release_retired(int dev, uint64_t device_bytes) {
  if (dev < 0 || dev >= kMaxDevices) return;
  ShimScope scope;
  entry::RelaxedCapture relaxed;
  State& s = state();
  std::lock_guard lock(s.mu);
  uint64_t freed = 0;
  for (size_t k = 0; k < s.retired.size() && freed < device_bytes;) {
    const Range& range = s.retired[k].range;
    if (range.dev != dev || range.device_bytes() == 0) {
      ++k;
      continue;
    }
    freed += range.device_bytes();
    release_one(s, k);
  }
}

void move(std::vector<Move>& moves, CUstream stream, bool per_thread) {
  if (moves.empty()) return;
  ShimScope scope;
  entry::RelaxedCapture relaxed;
  Timed timed(Timing::swap_move_ns);
  State& s = state();
  std::lock_guard lock(s.mu);
  auto fail = [](Move& m, const char* what, CUresult r, uint64_t n) {
    say(what, r, n);
    if (m.result == CUDA_SUCCESS) m.result = r;
  };
  // A chunk to move, where it sits in the program's range.
  struct Slot {
    Move* m;
    Range* range;
    size_t i;
    CUdeviceptr va() const { return m->base + range->offset_of(i); }
    uint64_t size() const { return range->size_of(i); }
    Chunk& chunk() const { return range->chunks[i]; }
    // Runs of neighbouring chunks of one range are remapped together (map_span).
    bool follows(const Slot& prev) const { return range == prev.range && i == prev.i + 1; }
  };
  struct Out {
    Slot at;
    Backing host;  // the copy
    Mark copied;   // recorded after the copy (scan order)
  };
  struct In {
    Slot at;
    Backing device;  // the new backing
    bool parked = false;  // the program's range has nothing mapped there
  };
  std::vector<Out> outs;
  std::vector<In> ins;
  reap(s, false);
  for (Move& m : moves) {
    auto it = s.ranges.find(m.base);
    if (it == s.ranges.end()) {
      m.result = CUDA_ERROR_INVALID_VALUE;
      continue;
    }
    Range& range = it->second;
    size_t from = m.offset / chunk_bytes();
    size_t to = std::min(range.chunks.size(), static_cast<size_t>((m.offset + m.bytes + chunk_bytes() - 1) / chunk_bytes()));
    for (size_t i = from; i < to; ++i) {
      Slot at{&m, &range, i};
      if (m.to_device) {
        if (!at.chunk().on_device()) ins.push_back({at, {}, at.chunk().parked});
        continue;
      }
      if (!at.chunk().on_device()) continue;
      Backing h;
      CUresult r = give_side(at.chunk().device);
      if (r == CUDA_SUCCESS) r = take_host(s, at.size(), range.dev, &h);
      if (r != CUDA_SUCCESS) {
        fail(m, "eviction", r, at.size());
        continue;
      }
      outs.push_back({at, h, {}});
    }
  }
  if (outs.empty() && ins.empty()) return;

  // Nothing queued that may write a chunk while it is copied out, or use one while its backing
  // changes: under context order nothing queued anywhere, on any stream; under scan order none of
  // the uses the scan saw. Context order copies on the launch's stream; scan order on the shim's,
  // out and in on different copy engines, each copy in of reused device memory after that
  // memory's copy out, and does not wait for the copies: whatever uses the ranges next waits for
  // them on the GPU (ready).
  CUstream out_stream = stream, in_stream = stream;
  bool out_pt = per_thread, in_pt = per_thread;
  bool scan = false;
  if (options().swap_order == SwapOrder::scan) {
    CUstream o = copy_stream(s, 0), i = o ? copy_stream(s, 1) : nullptr;
    if (i) {  // else this round goes in context order
      out_stream = o;
      in_stream = i;
      out_pt = in_pt = false;
      scan = true;
    }
  }
  // Scan order parks evicted chunks (Chunk::parked) when asked: only it sees every use before it
  // happens (GPUMEMSHIM_SWAP_PARK tells the price).
  const bool park = scan && options().swap_park.value && options().prefetch != Prefetch::off;
  std::vector<Range*> touched;
  if (scan) {
    for (const Out& o : outs) touched.push_back(o.at.range);
    for (const In& in : ins) touched.push_back(in.at.range);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  }
  CUresult r = scan ? wait_for_uses(s, touched) : sync_context();
  if (r != CUDA_SUCCESS) {
    for (Out& o : outs) give_host(s, o.host);
    for (Move& m : moves) fail(m, m.to_device ? "prefetch" : "eviction", r, m.bytes);
    return;
  }
  // Earlier rounds' copies of the ranges evicted end before their copies out start (copies in are
  // in order on their stream already).
  for (Range* range : touched) {
    if (std::any_of(outs.begin(), outs.end(), [&](const Out& o) { return o.at.range == range; })) gpu_wait(range->ready, out_stream, out_pt);
  }

  // Out: each chunk copied into its host memory, side range to side range.
  bool events = scan;
  std::erase_if(outs, [&](Out& o) {
    CUresult c = copy(o.host.side, o.at.chunk().device.side, o.at.size(), out_stream, out_pt);
    if (c == CUDA_SUCCESS) {
      if (events) o.copied = take_event(s);
      events = events && o.copied.event && record(o.copied, entry::stream_handle(out_stream, out_pt));
      return false;
    }
    give_host(s, o.host);
    fail(*o.at.m, "eviction", c, o.at.size());
    return true;
  });
  if (scan && !events && !outs.empty()) {
    // Without events the copies in cannot wait for the copies out of the memory they reuse.
    for (Out& o : outs) give_event(s, o.copied);
    if ((r = wait_stream(out_stream, out_pt)) != CUDA_SUCCESS) {
      for (Out& o : outs) {
        give_host(s, o.host);
        fail(*o.at.m, "eviction", r, o.at.size());
      }
      outs.clear();
    }
  }

  const uint64_t remap_start = trace::monotonic_ns();
  // Device memory that copies out may still read: it backs the prefetches (after its copy out)
  // or is released once the copies are over, as are host chunks they may still write.
  struct Freed {
    Backing device;
    Mark copied;
  };
  std::multimap<uint64_t, Freed> freed;  // by size
  std::vector<Backing> spent_devices, spent_hosts;
  // Evictions: the range is backed by its host copy at once (the copy goes through the side
  // ranges), or parked; the device memory goes to the prefetches.
  std::vector<Out*> out_run;
  auto evict_run = [&] {
    if (out_run.empty()) return;
    std::vector<Piece> host;
    for (Out* o : out_run) host.push_back({o->at.va(), o->at.size(), o->host.handle});
    // Not under a launch or transfer of another thread's that is between its await and its mark,
    // or work no scan sees: they would find nothing mapped.
    const bool parks = park && out_run.front()->at.range->in_flight == 0 && s.unscanned_open == 0;
    CUresult m = parks ? CUDA_SUCCESS : map_span(host, out_run.front()->at.range->dev);
    for (Out* o : out_run) {
      Chunk& c = o->at.chunk();
      if (m == CUDA_SUCCESS) {
        freed.emplace(o->at.size(), Freed{c.device, o->copied});
        c.device = {};
        c.host = o->host;
        c.parked = parks;
        continue;
      }
      // Put the device memory back: it still holds the data.
      spent_hosts.push_back(o->host);
      give_event(s, o->copied);
      if (map(o->at.va(), o->at.size(), c.device.handle, o->at.range->dev) != CUDA_SUCCESS) say_lost(o->at.size(), o->at.va());
      fail(*o->at.m, "eviction", m, o->at.size());
    }
    out_run.clear();
  };
  for (Out& o : outs) {
    if (!out_run.empty() && !o.at.follows(out_run.back()->at)) evict_run();
    CUresult u = call_real(GMS_REAL(cuMemUnmap), o.at.va(), static_cast<size_t>(o.at.size()));
    if (u != CUDA_SUCCESS) {
      evict_run();
      spent_hosts.push_back(o.host);
      give_event(s, o.copied);
      fail(*o.at.m, "eviction", u, o.at.size());
      continue;
    }
    out_run.push_back(&o);
  }
  evict_run();

  // Prefetches: new device backing (an evicted chunk's, else new), filled from the host copy,
  // which is kept until the copies are done.
  std::vector<In*> in_run;
  auto prefetch_run = [&] {
    if (in_run.empty()) return;
    std::vector<Piece> host, device;  // host: what was mapped before, to put back on failure
    for (In* in : in_run) {
      if (!in->parked) host.push_back({in->at.va(), in->at.size(), in->at.chunk().host.handle});
      device.push_back({in->at.va(), in->at.size(), in->device.handle});
    }
    const int dev = in_run.front()->at.range->dev;
    CUresult m = map_span(device, dev);
    if (m != CUDA_SUCCESS && !host.empty() && map_span(host, dev) != CUDA_SUCCESS) {
      for (const Piece& h : host) {
        if (map(h.va, h.size, h.handle, dev) != CUDA_SUCCESS) say_lost(h.size, h.va);
      }
    }
    for (In* in : in_run) {
      Chunk& c = in->at.chunk();
      CUresult r = m == CUDA_SUCCESS ? copy(in->device.side, c.host.side, in->at.size(), in_stream, in_pt) : m;
      if (r != CUDA_SUCCESS) {
        if (m == CUDA_SUCCESS) {
          // Back to the host copy, which still holds the data.
          call_real(GMS_REAL(cuMemUnmap), in->at.va(), static_cast<size_t>(in->at.size()));
          if (!in->parked && map(in->at.va(), in->at.size(), c.host.handle, dev) != CUDA_SUCCESS) say_lost(in->at.size(), in->at.va());
        }
        spent_devices.push_back(in->device);
        fail(*in->at.m, "prefetch", r, in->at.size());
        continue;
      }
      spent_hosts.push_back(c.host);
      c.host = {};
      c.parked = false;
      c.device = in->device;
    }
    in_run.clear();
  };
  for (In& in : ins) {
    if (!in_run.empty() && !in.at.follows(in_run.back()->at)) prefetch_run();
    auto f = freed.find(in.at.size());
    if (f != freed.end()) {
      in.device = f->second.device;
      gpu_wait(f->second.copied, in_stream, in_pt);  // its copy out first
      give_event(s, f->second.copied);
      freed.erase(f);
    } else {
      r = make_backing(in.at.size(), in.at.range->dev, false, &in.device);
      if (r == CUDA_ERROR_OUT_OF_MEMORY && !s.pending.empty()) {
        reap(s, true);  // evicted device memory still being copied out is released after its copy
        r = make_backing(in.at.size(), in.at.range->dev, false, &in.device);
      }
      if (r == CUDA_SUCCESS && (r = give_side(in.device)) != CUDA_SUCCESS) call_real(GMS_REAL(cuMemRelease), in.device.handle);
      if (r != CUDA_SUCCESS) {
        prefetch_run();
        fail(*in.at.m, "prefetch", r, in.at.size());  // the device is full: this chunk stays on the host
        continue;
      }
    }
    r = in.parked ? CUDA_SUCCESS : call_real(GMS_REAL(cuMemUnmap), in.at.va(), static_cast<size_t>(in.at.size()));
    if (r != CUDA_SUCCESS) {
      prefetch_run();
      spent_devices.push_back(in.device);
      fail(*in.at.m, "prefetch", r, in.at.size());
      continue;
    }
    in_run.push_back(&in);
  }
  prefetch_run();
  for (auto& [size, f] : freed) {
    spent_devices.push_back(f.device);
    give_event(s, f.copied);
  }
  runtime_stats().time(Timing::swap_remap_ns, trace::monotonic_ns() - remap_start);

  if (scan) {
    // One event ends the round's copies, in after out: the ranges are ready after it (launches
    // and transfers wait for it on the GPU: await_ready), and the spent memory is free.
    bool ok = true;
    if (!outs.empty()) {
      Mark out_done = take_event(s);
      ok = out_done.event && record(out_done, out_stream);
      if (ok) gpu_wait(out_done, in_stream, in_pt);
      give_event(s, out_done);
    }
    State::Pending p;
    if (ok) {
      p.done = take_event(s);
      ok = p.done.event && record(p.done, in_stream);
    }
    for (Range* range : touched) {
      if (!ok) break;
      if (!range->ready.event) range->ready = take_event(s);
      ok = range->ready.event && record(range->ready, in_stream);
    }
    const int dev = entry::current_device();
    if (ok && (ok = dev >= 0 && dev < kMaxDevices)) {
      Mark& last = s.copies[dev];
      if (!last.event) last = take_event(s);
      ok = last.event && record(last, in_stream);
    }
    if (ok) {
      p.hosts = std::move(spent_hosts);
      p.devices = std::move(spent_devices);
      s.pending.push_back(std::move(p));
      return;
    }
    give_event(s, p.done);
    // No events: wait here, as context order does.
  }
  // Other streams may use the chunks next: the copies must be over before anyone launches.
  r = wait_stream(in_stream, in_pt);
  if (r == CUDA_SUCCESS && scan) r = wait_stream(out_stream, out_pt);
  if (r != CUDA_SUCCESS) {
    for (In& in : ins) fail(*in.at.m, "prefetch", r, in.at.size());
  }
  for (const Backing& h : spent_hosts) give_host(s, h);
  for (const Backing& d : spent_devices) drop_backing(d);
}

void finish_copies() {
  if (options().swap_order != SwapOrder::scan) return;
  ShimScope scope;
  entry::RelaxedCapture relaxed;
  State& s = state();
  std::lock_guard lock(s.mu);
  ++s.unscanned_open;
  for (auto& [base, range] : s.ranges) {
    if (any_parked(range)) map_parked(base, range);
  }
  for (Mark& last : s.copies) {
    if (last.event && call_real(GMS_REAL(cuEventQuery), last.event) == CUDA_ERROR_NOT_READY) {
      Timed t(Timing::swap_wait_ns);
      call_real(GMS_REAL(cuEventSynchronize), last.event);
    }
  }
}

void end_unscanned() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.unscanned_open > 0) --s.unscanned_open;
}

void count_scanned_transfer() { g_scanned_transfers.fetch_add(1, std::memory_order_relaxed); }

void await_ready(const uintptr_t* bases, size_t n, CUstream stream, bool per_thread) {
  if (n == 0) return;
  ShimScope scope;
  entry::RelaxedCapture relaxed;
  State& s = state();
  std::lock_guard lock(s.mu);
  for (size_t k = 0; k < n; ++k) {
    const uintptr_t base = bases[k];
    auto it = s.ranges.find(base);
    if (it == s.ranges.end()) continue;
    ++it->second.in_flight;  // until its mark
    if (any_parked(it->second)) map_parked(base, it->second);  // left where it is, read over the link
    if (!it->second.ready.event) continue;
    Mark& ready = it->second.ready;
    CUresult q = call_real(GMS_REAL(cuEventQuery), ready.event);
    if (q == CUDA_SUCCESS) {
      give_event(s, ready);
    } else if (call_real(GMS_REAL(cuStreamWaitEvent), entry::stream_handle(stream, per_thread), ready.event, 0u) != CUDA_SUCCESS) {
      call_real(GMS_REAL(cuEventSynchronize), ready.event);
    }
  }
}

void mark_used(const uintptr_t* bases, size_t n, CUstream stream, bool per_thread, bool unmarked, bool launched) {
  constexpr size_t kMaxStreams = 4;  // per range; past it the oldest mark is waited for and reused
  ShimScope scope;
  entry::RelaxedCapture relaxed;
  State& s = state();
  const CUstream handle = entry::stream_handle(stream, per_thread);
  std::lock_guard lock(s.mu);
  if (launched && unmarked) s.unscanned_seen = kUnmarked;
  for (size_t k = 0; k < n; ++k) {
    const uintptr_t base = bases[k];
    auto it = s.ranges.find(base);
    if (it == s.ranges.end()) continue;
    if (it->second.in_flight > 0) --it->second.in_flight;
    if (!launched || unmarked) continue;
    std::vector<Mark>& uses = it->second.uses;
    auto m = std::find_if(uses.begin(), uses.end(), [&](const Mark& u) { return u.stream == handle; });
    if (m == uses.end() && uses.size() >= kMaxStreams) {
      m = uses.begin();
      call_real(GMS_REAL(cuEventSynchronize), m->event);
    }
    if (m == uses.end()) {
      Mark fresh = take_event(s);
      if (fresh.event) {
        uses.push_back(fresh);
        m = uses.end() - 1;
      }
    }
    if (m == uses.end() || !record(*m, handle)) {
      if (m != uses.end()) uses.erase(m);
      s.unscanned_seen = kUnmarked;  // an unmarked use: the next round waits for the context
    }
  }
}

}  // namespace gms::act::swap
