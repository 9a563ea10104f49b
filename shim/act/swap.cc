#include "swap.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/guard.h"
#include "core/ledger.h"
#include "core/log.h"
#include "core/options.h"
#include "core/runtime.h"
#include "driver/budget.h"
#include "driver/calls.h"
#include "policy/arena.h"
#include "policy/residency.h"
#include "trace/trace.h"

namespace gms::act::swap {
namespace {

using driver::call_real;

constexpr uint64_t kGranule = 2ull << 20;  // cuMemCreate's granularity on every current GPU

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
  bool parked = false;  // set with set_parked
  bool on_device() const { return device.handle != 0; }
};

// Chunks parked, counted: a pointer query takes no lock while none is (unpark). A chunk that goes
// away parked is counted off when its range is erased (release_dead).
std::atomic<int64_t> g_parked{0};
void set_parked(Chunk& c, bool parked) {
  if (c.parked != parked) g_parked.fetch_add(parked ? 1 : -1, std::memory_order_relaxed);
  c.parked = parked;
}

// An event and the device of the context it was made in (its pool).
struct Mark {
  CUevent event = nullptr;
  CUstream stream = nullptr;  // where it was last recorded (for a launch's use)
  int dev = 0;
};

// One chunk of a slab, backed (policy/arena.h): the unit that is mapped, moved and tracked.
struct Range {
  uint64_t size = 0;  // chunk_bytes()
  int dev = 0;
  Chunk chunk;
  // GPUMEMSHIM_SWAP_ORDER=scan: the last launch on each stream that the scan saw use the range,
  // and the copies in that launches must wait for. A move waits for these instead of the context.
  std::vector<Mark> uses;
  Mark ready;
  // Launches and transfers between their await_ready and their mark: another thread's round must
  // not park the range under them (they would fault, not read the host copy).
  int in_flight = 0;
};

using Tag = policy::Arena::Tag;

// A reservation of the program's address space where movable allocations go (policy/arena.h),
// chunk aligned, so that the chunk of an address is the address rounded down.
struct Slab {
  CUdeviceptr reserved = 0;  // what cuMemAddressFree takes
  uint64_t reserved_size = 0;
  uintptr_t base = 0;
  int dev = 0;
  policy::Arena arena;
  Slab(const policy::Arena::Config& c) : arena(c) {}
  uintptr_t chunk_base(uint64_t c) const { return base + c * arena.chunk_bytes(); }
  uint64_t chunk_at(uintptr_t a) const { return (a - base) / arena.chunk_bytes(); }
  bool holds(uintptr_t a) const { return a >= base && a - base < arena.chunks() * arena.chunk_bytes(); }
};

constexpr int kMaxDevices = DeviceLedger::kMaxDevices;

struct State {
  std::mutex mu;  // guards everything below; held across moves (they are synchronous anyway)
  std::unordered_map<uintptr_t, Range> ranges;  // every backed chunk, by its base: one chunk each
  std::vector<std::unique_ptr<Slab>> slabs;
  // Backed chunks with nothing live, oldest first, and the device memory of those on each device:
  // kept for the next allocation, the first to go for room.
  std::deque<uintptr_t> dead;
  uint64_t dead_device[kMaxDevices] = {};
  // Stream-ordered frees whose space may still be in use: the event, and the slab it tags.
  struct Tagged {
    Mark mark;
    Slab* slab = nullptr;
  };
  std::unordered_map<Tag, Tagged> tags;
  std::deque<Tag> tag_order;  // oldest first; some may be gone from `tags`
  Tag next_tag = 1;
  std::multimap<std::pair<int, uint64_t>, Backing> spare;  // host chunks, by device and size
  // Device memory no chunk holds, side range kept: what dead chunks give back for room and
  // evictions leave after their copies. The next new chunk or prefetch maps it instead of making
  // memory, and the memory it would replace is not released: per step of resnet50 that was about
  // 156 releases and as many cuMemCreate, side reserves and side access calls. Not counted by the
  // budget's users (it is the room they were given); trim_spares keeps it within the budget.
  std::vector<Backing> spare_device[kMaxDevices];
  std::vector<CUevent> events[kMaxDevices];  // idle events, by the device of their context
  // GPUMEMSHIM_SWAP_ORDER=scan: the shim's own streams for copies out and in, by context device;
  // host chunks that copies in still read and device memory that copies out still read, each
  // batch with the event that ends them; the end of the last round's copies; and the count of
  // copies, memsets and graph launches (work the scan cannot see) at the last round.
  CUstream copy_streams[kMaxDevices][2] = {};
  // The gate on copies to the host (copy_out), by device: a host word the GPU reads, and its
  // address there; null when there is none (not made yet, or the driver would not).
  uint32_t* gate[kMaxDevices] = {};
  CUdeviceptr gate_at[kMaxDevices] = {};
  bool gate_tried[kMaxDevices] = {};
  struct Pending {
    Mark done;
    std::vector<Backing> hosts;    // back to the spares
    std::vector<Backing> devices;  // spare after them
  };
  std::deque<Pending> pending;
  Mark copies[kMaxDevices];  // by context device
  int unscanned_open = 0;     // work no scan sees, between finish_copies and end_unscanned
  uint64_t unscanned_seen = 0;
  int queueing = 0;           // windows between begin_queue and end_queue, all threads
  // Signalled when another thread's work is queued: queueing drops.
  std::condition_variable queued;
  bool queueing_stuck_said = false;
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
  return driver::sync_stream(stream, per_thread);
}

CUmemAllocationProp prop(bool host, int dev) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = host ? 0 : dev;
  return p;
}

// --- The gate on the shim's copies to the host (scan order) ---
// While copies to the host run on a GPU, cuMemSetAccess for it takes about 15 ms per GiB on the
// H100, against 1 with none (tests/gpu/placement/vmm_access.cu); resnet50 under a 7 GB budget
// spent 54 ms a step so, mapping new chunks while evictions were copied out. So each copy out
// goes in pieces, each behind a wait on the GPU for a host word to be 0, and the host makes it 1
// for the length of its access calls: at most one piece is then in flight. Measured on the H100
// (tests/gpu/placement/vmm_gate.cu): 128 MiB made accessible in 0.22 ms with the gate shut
// against 1.4 to 1.8 ms open; gated copies in 8 MiB pieces ran at 53.7 GB/s against 54.5. In
// resnet50 (scan order with parking) the access calls under copies fell to 6 ms a step, but the
// step did not shorten: the host spends the time waiting for frees instead (release_dead).
// Context order waits for its copies on the host right after the remaps; gated there, its steps
// took 384 and 396 ms against 345 and 350, so its copies go ungated.
constexpr uint64_t kGatePiece = 8ull << 20;

// Caller holds s.mu. The gate of `dev` (the current context's device), made at the first use.
uint32_t* gate(State& s, int dev) {
  if (dev < 0 || dev >= kMaxDevices) return nullptr;
  if (!s.gate_tried[dev]) {
    s.gate_tried[dev] = true;
    void* p = nullptr;
    CUdeviceptr at = 0;
    if (call_real(GMS_REAL(cuMemHostAlloc), &p, size_t{64}, static_cast<unsigned>(CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)) ==
            CUDA_SUCCESS &&
        call_real(GMS_REAL(cuMemHostGetDevicePointer_v2), &at, p, 0u) == CUDA_SUCCESS) {
      __atomic_store_n(static_cast<uint32_t*>(p), 0u, __ATOMIC_SEQ_CST);
      s.gate[dev] = static_cast<uint32_t*>(p);
      s.gate_at[dev] = at;
    }
    // Else copies go ungated (and the memory, if any, stays: one word).
  }
  return s.gate[dev];
}

// Shuts the gate of `dev`, if it has one, while it lives. Caller holds s.mu (one at a time).
class GateShut {
 public:
  explicit GateShut(int dev) {
    State& s = state();
    if (dev >= 0 && dev < kMaxDevices && s.gate[dev]) {
      word_ = s.gate[dev];
      __atomic_store_n(word_, 1u, __ATOMIC_SEQ_CST);
    }
  }
  ~GateShut() {
    if (word_) __atomic_store_n(word_, 0u, __ATOMIC_SEQ_CST);
  }
  GateShut(const GateShut&) = delete;
  GateShut& operator=(const GateShut&) = delete;

 private:
  uint32_t* word_ = nullptr;
};

CUresult allow_device(CUdeviceptr va, uint64_t size, int dev) {
  CUmemAccessDesc d{};
  d.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  GateShut shut(dev);
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
  m.dev = driver::current_device();
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

void give_device(State& s, const Backing& d) {
  s.spare_device[d.dev].push_back(d);
}

uint64_t spare_bytes(const State& s, int dev) {
  uint64_t n = 0;
  for (const Backing& b : s.spare_device[dev]) n += b.size;
  return n;
}

// Batches whose copies are over: their host chunks and device memory go back to the spares;
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
    for (const Backing& d : p.devices) give_device(s, d);
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

// Spare device memory of `size` on `dev` (side range and all), else new memory without a side
// range; after waiting for the evictions' copies when the device is full and some are under way.
CUresult take_device(State& s, uint64_t size, int dev, Backing* out) {
  auto from_spares = [&] {
    auto& pool = s.spare_device[dev];
    auto it = std::find_if(pool.begin(), pool.end(), [&](const Backing& b) { return b.size == size; });
    if (it == pool.end()) return false;
    *out = *it;
    pool.erase(it);
    return true;
  };
  if (from_spares()) return CUDA_SUCCESS;
  CUresult r = make_backing(size, dev, false, out);
  if (r == CUDA_ERROR_OUT_OF_MEMORY && !s.pending.empty()) {
    reap(s, true);  // evicted device memory still being copied out is spare after its copy
    r = from_spares() ? CUDA_SUCCESS : make_backing(size, dev, false, out);
  }
  return r;
}

// Releases a chunk's backing, or with `keep`, makes its device memory spare; the program's range
// must already be unmapped there.
void release(State& s, Chunk& c, bool keep = false) {
  if (c.on_device()) {
    if (keep) {
      give_device(s, c.device);
    } else {
      drop_backing(c.device);
    }
    c.device = {};
  } else if (c.host.handle) {
    give_host(s, c.host);
    c.host = {};
  }
}

CUresult copy(CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream stream, bool per_thread) {
  return per_thread ? call_real(GMS_REAL(cuMemcpyDtoDAsync_v2_ptsz), dst, src, static_cast<size_t>(n), stream)
                    : call_real(GMS_REAL(cuMemcpyDtoDAsync_v2), dst, src, static_cast<size_t>(n), stream);
}

// A copy to the host behind the gate of `dev`, piece by piece (ungated for dev -1, when there is
// no gate, or when the driver refuses a wait: from then on for good).
CUresult copy_out(State& s, CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream stream, bool per_thread, int dev) {
  for (uint64_t off = 0; off < n; off += kGatePiece) {
    if (!gate(s, dev)) return copy(dst + off, src + off, n - off, stream, per_thread);
    const CUresult w = per_thread
                           ? call_real(GMS_REAL(cuStreamWaitValue32_v2_ptsz), stream, s.gate_at[dev], cuuint32_t{0}, static_cast<unsigned>(CU_STREAM_WAIT_VALUE_EQ))
                           : call_real(GMS_REAL(cuStreamWaitValue32_v2), stream, s.gate_at[dev], cuuint32_t{0}, static_cast<unsigned>(CU_STREAM_WAIT_VALUE_EQ));
    if (w != CUDA_SUCCESS) {
      s.gate[dev] = nullptr;
      Line l;
      l.str("swap: the driver would not queue a wait on a host word (CUresult ").i64(w)
          .str("): copies to the host go ungated, and mapping under them is slower");
      log(LogLevel::info, l);
      return copy(dst + off, src + off, n - off, stream, per_thread);
    }
    const CUresult r = copy(dst + off, src + off, std::min(kGatePiece, n - off), stream, per_thread);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
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
  const int dev = driver::current_device();
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

// Before a round of moves: waits (on s.mu, via `lock`) while another thread is queueing work that
// the round's synchronisation (context order) or its wait for the uses (scan order) would not cover
// yet: any launch, transfer or work no scan sees between the end of its planning and its driver
// call and marks (queueing; a range's in_flight and unscanned_open lie within such windows). Else
// the round's copy out could run beside that work on the GPU, and what it writes there after the
// copy read the chunk would be lost. The waiter holds the residency lock, which new windows need:
// they drain. Queueing a launch takes microseconds, but a synchronous copy no scan sees holds its
// window for as long as it runs; past a minute, a window was never closed (a bug), and the round
// goes ahead rather than hang the program.
void wait_for_queueing(State& s, std::unique_lock<std::mutex>& lock) {
  auto busy = [&] { return s.queueing > 0; };
  if (!busy()) return;
  Timed t(Timing::swap_wait_ns);
  constexpr int kSlice = 2, kGiveUp = 60;  // seconds
  for (int waited = 0; !s.queued.wait_for(lock, std::chrono::seconds(kSlice), [&] { return !busy(); });) {
    waited += kSlice;
    if (waited < kGiveUp) continue;
    if (!s.queueing_stuck_said) {
      s.queueing_stuck_said = true;
      log(LogLevel::warn, Line().str("swap: another thread's work on movable memory was still being queued after ")
                              .i64(kGiveUp).str(" s; moving the memory without waiting for it (its data may be stale)"));
    }
    return;
  }
}

// Work on `stream` (per_thread: the per-thread default) waits on the GPU for `m`, or here when
// the driver will not queue the wait.
void gpu_wait(const Mark& m, CUstream stream, bool per_thread) {
  if (!m.event) return;
  if (call_real(GMS_REAL(cuStreamWaitEvent), driver::stream_handle(stream, per_thread), m.event, 0u) != CUDA_SUCCESS) {
    Timed t(Timing::swap_wait_ns);
    call_real(GMS_REAL(cuEventSynchronize), m.event);
  }
}

// Maps the host memory of the parked chunks among `bases` back at their place in the program's
// slab, in runs of neighbours (one access call each: the driver charges per call). A chunk that
// cannot be mapped stays parked: a kernel that reaches it faults.
void map_parked(State& s, std::vector<uintptr_t>& bases) {
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

// --- Where allocations go: slabs, the chunks with nothing live, the frees still in flight ---

Slab* slab_of(State& s, uintptr_t a) {
  for (auto& sl : s.slabs) {
    if (sl->holds(a)) return sl.get();
  }
  return nullptr;
}

policy::Arena::Backing backing_of(const Range& r) {
  const Chunk& c = r.chunk;
  return c.on_device() ? policy::Arena::Backing::device : c.host.handle ? policy::Arena::Backing::host : policy::Arena::Backing::none;
}

// Tells the chunk's slab how it is backed now (after a move). A chunk whose last allocation was
// freed after its move was planned may still be moved: its device memory is counted as it is.
void note_backing(State& s, uintptr_t chunk, const Range& r) {
  Slab* sl = slab_of(s, chunk);
  if (!sl) return;
  const uint64_t c = sl->chunk_at(chunk);
  const bool was = sl->arena.backing(c) == policy::Arena::Backing::device, now = r.chunk.on_device();
  if (sl->arena.live_in(c) == 0 && was != now) {
    if (now) {
      s.dead_device[sl->dev] += r.size;
    } else {
      s.dead_device[sl->dev] -= r.size;
    }
  }
  sl->arena.set_backing(c, backing_of(r));
}

void drop_tag(State& s, Tag t) {
  auto it = s.tags.find(t);
  if (it == s.tags.end()) return;
  give_event(s, it->second.mark);
  s.tags.erase(it);
}

// Frees whose work is over, oldest first: their space waits for nothing any more.
void settle_tags(State& s) {
  while (!s.tag_order.empty()) {
    auto it = s.tags.find(s.tag_order.front());
    if (it != s.tags.end()) {
      if (call_real(GMS_REAL(cuEventQuery), it->second.mark.event) == CUDA_ERROR_NOT_READY) return;
      it->second.slab->arena.settle(it->first);
      drop_tag(s, it->first);
    }
    s.tag_order.pop_front();
  }
}

// Waits here for the frees of the chunk's free space: nothing queued before them may still use it.
void settle_chunk(State& s, Slab& sl, uint64_t c) {
  for (Tag t : sl.arena.tags_in(c)) {
    auto it = s.tags.find(t);
    if (it == s.tags.end()) continue;
    {
      Timed timed(Timing::swap_wait_ns);
      call_real(GMS_REAL(cuEventSynchronize), it->second.mark.event);
    }
    sl.arena.settle(t);
    drop_tag(s, t);
  }
}

// The use of space handed out waits for the frees it covers: on the GPU when stream-ordered.
void wait_frees(State& s, const policy::Arena::Grant& g, const Use& use) {
  for (Tag t : g.waits) {
    auto it = s.tags.find(t);
    if (it == s.tags.end()) continue;
    if (use.stream_ordered) {
      // Even on what looks like the same stream: the per-thread default stream is one per
      // thread, and a destroyed stream's handle comes back.
      gpu_wait(it->second.mark, use.stream, use.per_thread);
    } else {
      Timed timed(Timing::swap_wait_ns);
      call_real(GMS_REAL(cuEventSynchronize), it->second.mark.event);
    }
  }
  for (Tag t : g.dropped) drop_tag(s, t);
}

// Unmaps a chunk (unless parked) and gives its memory back (device memory to the spares with
// `keep`); false (and a leak, rather than reusing mapped memory) when the unmap fails.
bool unback(State& s, uintptr_t base, Range& range, bool keep) {
  Chunk& c = range.chunk;
  if (!c.parked && call_real(GMS_REAL(cuMemUnmap), static_cast<CUdeviceptr>(base), static_cast<size_t>(range.size)) != CUDA_SUCCESS) {
    return false;
  }
  release(s, c, keep);
  return true;
}

// Dead chunk k (of s.dead) gives its memory back, once the frees of its space are over: device
// memory to the spares with `keep`.
void release_dead(State& s, size_t k, bool keep = false) {
  const uintptr_t base = s.dead[k];
  s.dead.erase(s.dead.begin() + static_cast<std::ptrdiff_t>(k));
  Slab* sl = slab_of(s, base);
  auto it = s.ranges.find(base);
  if (!sl || it == s.ranges.end()) return;
  const uint64_t c = sl->chunk_at(base);
  settle_chunk(s, *sl, c);
  if (it->second.chunk.on_device()) s.dead_device[sl->dev] -= it->second.size;
  if (!unback(s, base, it->second, keep)) return;
  set_parked(it->second.chunk, false);
  s.ranges.erase(it);
  sl->arena.set_backing(c, policy::Arena::Backing::none);
}

// Host-backed dead chunks (evicted, then freed) whose frees are over: their host memory back to
// the spares, their addresses free for new chunks.
void release_dead_hosts(State& s) {
  settle_tags(s);
  for (size_t k = 0; k < s.dead.size();) {
    auto it = s.ranges.find(s.dead[k]);
    Slab* sl = slab_of(s, s.dead[k]);
    if (it != s.ranges.end() && sl && !it->second.chunk.on_device() && sl->arena.tags_in(sl->chunk_at(s.dead[k])).empty()) {
      release_dead(s, k);
    } else {
      ++k;
    }
  }
}

// Chunk c of `sl` holds nothing live any more: kept, backed as it is, for the next allocation.
void bury(State& s, Slab& sl, uint64_t c) {
  auto it = s.ranges.find(sl.chunk_base(c));
  if (it == s.ranges.end()) return;
  drop_marks(s, it->second);  // the frees were ordered after their uses
  it->second.in_flight = 0;
  s.dead.push_back(it->first);
  if (it->second.chunk.on_device()) s.dead_device[sl.dev] += it->second.size;
}

// The chunks of `g` that held nothing live: off the dead list, to be tracked again.
void wake(State& s, Slab& sl, const policy::Arena::Grant& g, std::vector<Woken>* woken) {
  for (uint64_t c : g.woken) {
    const uintptr_t base = sl.chunk_base(c);
    auto it = s.ranges.find(base);
    if (it == s.ranges.end()) continue;
    const bool on_device = it->second.chunk.on_device();
    auto d = std::find(s.dead.begin(), s.dead.end(), base);
    if (d != s.dead.end()) {
      s.dead.erase(d);
      if (on_device) s.dead_device[sl.dev] -= it->second.size;
    }
    woken->push_back({base, on_device});
  }
}

// The best place for `bytes` on `dev` over all its slabs (policy::Arena::find).
std::pair<Slab*, policy::Arena::Spot> find_spot(State& s, uint64_t bytes, int dev, bool device_only) {
  std::pair<Slab*, policy::Arena::Spot> best{nullptr, {}};
  for (auto& sl : s.slabs) {
    if (sl->dev != dev) continue;
    policy::Arena::Spot spot = sl->arena.find(bytes, device_only);
    if (spot.ok && (!best.first || spot.unbacked < best.second.unbacked)) best = {sl.get(), spot};
  }
  return best;
}

// A new slab of at least `bytes` on `dev`, or null (*r says why).
Slab* new_slab(State& s, int dev, uint64_t bytes, CUresult* r) {
  const uint64_t chunk = chunk_bytes();
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  policy::Arena::Config cfg;
  cfg.chunk = chunk;
  cfg.granule = kGranule;
  cfg.chunks = chunks;
  auto sl = std::make_unique<Slab>(cfg);
  sl->dev = dev;
  // One chunk more than needed, in case the driver does not honour the alignment.
  sl->reserved_size = (chunks + 1) * chunk;
  *r = call_real(GMS_REAL(cuMemAddressReserve), &sl->reserved, static_cast<size_t>(sl->reserved_size), static_cast<size_t>(chunk),
                 CUdeviceptr{0}, 0ull);
  if (*r != CUDA_SUCCESS) return nullptr;
  sl->base = (static_cast<uintptr_t>(sl->reserved) + chunk - 1) / chunk * chunk;
  s.slabs.push_back(std::move(sl));
  return s.slabs.back().get();
}

// Caller holds s.mu. The program holds no movable memory any more: every chunk, slab, spare and
// event goes back.
void release_all(State& s) {
  while (!s.dead.empty()) release_dead(s, 0);
  for (auto& sl : s.slabs) call_real(GMS_REAL(cuMemAddressFree), sl->reserved, static_cast<size_t>(sl->reserved_size));
  s.slabs.clear();
  for (auto& [t, tagged] : s.tags) give_event(s, tagged.mark);
  s.tags.clear();
  s.tag_order.clear();
  reap(s, true);
  for (auto& [key, h] : s.spare) drop_backing(h);
  s.spare.clear();
  for (int d = 0; d < kMaxDevices; ++d) {
    for (const Backing& b : s.spare_device[d]) drop_backing(b);
    s.spare_device[d].clear();
  }
  for (Mark& m : s.copies) give_event(s, m);
  for (auto& pool : s.events) {
    for (CUevent e : pool) call_real(GMS_REAL(cuEventDestroy_v2), e);
    pool.clear();
  }
}

}  // namespace

uint64_t chunk_bytes() {
  static const uint64_t bytes = [] {
    const uint64_t asked = options().swap_chunk.bytes;
    uint64_t c = kGranule;
    while (c * 2 <= asked && c * 2 <= policy::ResidencyConfig::kMaxChunk) c *= 2;
    if (c != asked) {
      // A power of two: slabs are aligned to it.
      Line l;
      l.str("GPUMEMSHIM_SWAP_CHUNK=").bytes(asked).str(": expected a power of two from 2M to 64M; using ").bytes(c);
      log(LogLevel::warn, l);
    }
    return c;
  }();
  return bytes;
}

bool reuse(CUdeviceptr* out, uint64_t bytes, int dev, const Use& use, std::vector<Woken>* woken) {
  if (dev < 0 || dev >= kMaxDevices) return false;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  Timed timed(Timing::swap_create_ns);
  State& s = state();
  std::lock_guard lock(s.mu);
  auto [sl, spot] = find_spot(s, bytes, dev, true);
  policy::Arena::Grant g;
  if (!sl || !sl->arena.take(spot.offset, spot.size, &g)) return false;
  wait_frees(s, g, use);
  wake(s, *sl, g, woken);
  *out = static_cast<CUdeviceptr>(sl->base + spot.offset);
  runtime_stats().decision(Decision::swap_reused, spot.size);
  return true;
}

uint64_t backing_needed(uint64_t bytes, int dev) {
  ShimScope scope;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto [sl, spot] = find_spot(s, bytes, dev, false);
  const uint64_t chunk = chunk_bytes();
  return sl ? spot.unbacked * chunk : (bytes + chunk - 1) / chunk * chunk;
}

CUresult create(CUdeviceptr* out, uint64_t bytes, int dev, bool on_device, const Use& use, uint64_t slab_bytes,
                std::vector<Woken>* woken) {
  if (dev < 0 || dev >= kMaxDevices) return CUDA_ERROR_INVALID_VALUE;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  Timed timed(Timing::swap_create_ns);
  State& s = state();
  std::lock_guard lock(s.mu);
  release_dead_hosts(s);
  auto [sl, spot] = find_spot(s, bytes, dev, false);
  CUresult r = CUDA_SUCCESS;
  if (!sl) {
    if (!(sl = new_slab(s, dev, std::max(slab_bytes, bytes + kGranule), &r))) return r;
    spot = sl->arena.find(bytes, false);
    if (!spot.ok) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // The chunks with no backing get theirs first, so that a failure leaves the arena as it was.
  const uint64_t chunk = sl->arena.chunk_bytes();
  std::vector<std::pair<uint64_t, Chunk>> made;
  for (uint64_t c = sl->arena.first_chunk(spot.offset); c <= sl->arena.last_chunk(spot.offset, spot.size) && r == CUDA_SUCCESS; ++c) {
    if (sl->arena.backing(c) != policy::Arena::Backing::none) continue;
    Chunk ch;
    r = on_device ? take_device(s, chunk, dev, &ch.device) : take_host(s, chunk, dev, &ch.host);
    if (r == CUDA_SUCCESS) made.emplace_back(c, ch);
  }
  // Mapped in runs of neighbours: one access call each.
  std::vector<std::vector<Piece>> runs;
  for (const auto& [c, ch] : made) {
    Piece p{static_cast<CUdeviceptr>(sl->chunk_base(c)), chunk, on_device ? ch.device.handle : ch.host.handle};
    if (runs.empty() || runs.back().back().va + chunk != p.va) runs.emplace_back();
    runs.back().push_back(p);
  }
  size_t mapped = 0;
  for (; mapped < runs.size() && r == CUDA_SUCCESS; ++mapped) r = map_span(runs[mapped], dev);
  if (r != CUDA_SUCCESS) {
    for (size_t k = 0; k + 1 < mapped; ++k) {
      for (const Piece& p : runs[k]) call_real(GMS_REAL(cuMemUnmap), p.va, static_cast<size_t>(p.size));
    }
    for (auto& [c, ch] : made) release(s, ch, true);
    return r;
  }
  for (auto& [c, ch] : made) {
    Range range;
    range.size = chunk;
    range.dev = dev;
    range.chunk = ch;
    s.ranges.emplace(sl->chunk_base(c), std::move(range));
    sl->arena.set_backing(c, on_device ? policy::Arena::Backing::device : policy::Arena::Backing::host);
  }
  policy::Arena::Grant g;
  sl->arena.take(spot.offset, spot.size, &g);
  wait_frees(s, g, use);
  wake(s, *sl, g, woken);
  *out = static_cast<CUdeviceptr>(sl->base + spot.offset);
  return CUDA_SUCCESS;
}

CUresult retire(uintptr_t base, const Use& use, uint64_t keep, std::vector<uintptr_t>* dead) {
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  Timed timed(Timing::swap_free_ns);
  State& s = state();
  std::lock_guard lock(s.mu);
  Slab* sl = slab_of(s, base);
  const uint64_t size = sl ? sl->arena.size_of(base - sl->base) : 0;
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  const int dev = sl->dev;
  settle_tags(s);
  Tag tag = 0;
  CUresult r = CUDA_SUCCESS;
  if (use.stream_ordered) {
    // Work queued on the stream before the free may still use the space, and the shim's copies of
    // its chunks may still run: the event marks the end of both.
    for (uintptr_t c = chunk_of(base); c < base + size; c += sl->arena.chunk_bytes()) {
      auto it = s.ranges.find(c);
      if (it != s.ranges.end()) gpu_wait(it->second.ready, use.stream, use.per_thread);
    }
    Mark e = take_event(s);
    if (e.event && record(e, driver::stream_handle(use.stream, use.per_thread))) {
      tag = s.next_tag++;
      s.tags[tag] = State::Tagged{e, sl};
      s.tag_order.push_back(tag);
    } else {
      give_event(s, e);
      r = wait_stream(use.stream, use.per_thread);
    }
  } else {
    // A kernel queued on any stream may still use the space, which the next allocation gets.
    r = sync_context();
  }
  if (r != CUDA_SUCCESS) return r;  // the program keeps it: nothing is known to be safe
  policy::Arena::Freed f = sl->arena.give(base - sl->base, tag);
  for (uint64_t c : f.dead) {
    bury(s, *sl, c);
    dead->push_back(sl->chunk_base(c));
  }
  if (std::all_of(s.slabs.begin(), s.slabs.end(), [](const auto& x) { return x->arena.empty(); })) {
    release_all(s);
    return CUDA_SUCCESS;
  }
  for (size_t k = 0; k < s.dead.size() && s.dead_device[dev] > keep;) {
    auto it = s.ranges.find(s.dead[k]);
    if (it != s.ranges.end() && it->second.dev == dev && it->second.chunk.on_device()) {
      release_dead(s, k);
    } else {
      ++k;
    }
  }
  return CUDA_SUCCESS;
}

bool holds_nothing(uintptr_t chunk) {
  State& s = state();
  std::lock_guard lock(s.mu);
  Slab* sl = slab_of(s, chunk);
  return !sl || sl->arena.live_in(sl->chunk_at(chunk)) == 0;
}

bool uses_over(uintptr_t chunk) {
  if (options().swap_order != SwapOrder::scan) return false;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.ranges.find(chunk);
  // Another thread's work that no scan sees may be under way (between finish_copies and its
  // mark): it may use the chunk.
  if (it == s.ranges.end() || !it->second.chunk.on_device() || it->second.in_flight != 0 || s.unscanned_open != 0 ||
      unscanned_work() != s.unscanned_seen) {
    return false;
  }
  for (const Mark& m : it->second.uses) {
    if (call_real(GMS_REAL(cuEventQuery), m.event) != CUDA_SUCCESS) return false;
  }
  return true;
}

uint64_t retired_device_bytes(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.dead_device[dev];
}

void release_retired(int dev, uint64_t device_bytes, uint64_t keep_spare) {
  if (dev < 0 || dev >= kMaxDevices) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  State& s = state();
  std::lock_guard lock(s.mu);
  uint64_t freed = 0;
  for (size_t k = 0; k < s.dead.size() && freed < device_bytes;) {
    auto it = s.ranges.find(s.dead[k]);
    if (it == s.ranges.end() || it->second.dev != dev || !it->second.chunk.on_device()) {
      ++k;
      continue;
    }
    freed += it->second.size;
    release_dead(s, k, spare_bytes(s, dev) < keep_spare);
  }
}

uint64_t spare_device_bytes(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  State& s = state();
  std::lock_guard lock(s.mu);
  return spare_bytes(s, dev);
}

void trim_spares(int dev, uint64_t allowed) {
  if (dev < 0 || dev >= kMaxDevices) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto& pool = s.spare_device[dev];
  for (uint64_t held = spare_bytes(s, dev); !pool.empty() && held > allowed;) {
    held -= pool.back().size;
    drop_backing(pool.back());
    pool.pop_back();
  }
}

uint64_t taken(int dev) { return ledger().used(dev) + ledger().resident(dev) + retired_device_bytes(dev); }

void fit_spares(int dev, uint64_t more) {
  const uint64_t limit = budget::limit(dev), held = taken(dev) + more;
  trim_spares(dev, limit > held ? limit - held : 0);
}

void move(std::vector<Move>& moves, CUstream stream, bool per_thread) {
  if (moves.empty()) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  Timed timed(Timing::swap_move_ns);
  State& s = state();
  std::unique_lock lock(s.mu);
  wait_for_queueing(s, lock);
  auto fail = [](Move& m, const char* what, CUresult r, uint64_t n) {
    say(what, r, n);
    if (m.result == CUDA_SUCCESS) m.result = r;
  };
  // A chunk to move, where it sits in the program's slab.
  struct Slot {
    Move* m;
    Range* range;
    CUdeviceptr va() const { return m->base; }
    uint64_t size() const { return range->size; }
    Chunk& chunk() const { return range->chunk; }
    // Runs of neighbouring chunks are remapped together (map_span).
    bool follows(const Slot& prev) const { return range->dev == prev.range->dev && va() == prev.va() + prev.size(); }
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
    Slot at{&m, &range};  // a region is one chunk: a move is all of it
    if (m.to_device) {
      if (!range.chunk.on_device()) ins.push_back({at, {}, range.chunk.parked});
      continue;
    }
    if (!range.chunk.on_device()) continue;
    Backing h;
    CUresult r = give_side(range.chunk.device);
    if (r == CUDA_SUCCESS) r = take_host(s, range.size, range.dev, &h);
    if (r != CUDA_SUCCESS) {
      fail(m, "eviction", r, range.size);
      continue;
    }
    outs.push_back({at, h, {}});
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
    CUresult c = copy_out(s, o.host.side, o.at.chunk().device.side, o.at.size(), out_stream, out_pt, scan ? o.at.range->dev : -1);
    if (c == CUDA_SUCCESS) {
      if (events) o.copied = take_event(s);
      events = events && o.copied.event && record(o.copied, driver::stream_handle(out_stream, out_pt));
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
    const bool parks = park && s.unscanned_open == 0 &&
                       std::all_of(out_run.begin(), out_run.end(), [](const Out* o) { return o->at.range->in_flight == 0; });
    CUresult m = parks ? CUDA_SUCCESS : map_span(host, out_run.front()->at.range->dev);
    for (Out* o : out_run) {
      Chunk& c = o->at.chunk();
      if (m == CUDA_SUCCESS) {
        freed.emplace(o->at.size(), Freed{c.device, o->copied});
        c.device = {};
        c.host = o->host;
        set_parked(c, parks);
        note_backing(s, o->at.va(), *o->at.range);
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
      set_parked(c, false);
      c.device = in->device;
      note_backing(s, in->at.va(), *in->at.range);
    }
    in_run.clear();
  };
  for (In& in : ins) {
    if (!in_run.empty() && !in.at.follows(in_run.back()->at)) prefetch_run();
    // Spare memory first: this round's evicted memory makes the copy in wait for its copy out.
    auto f = freed.find(in.at.size());
    const bool spare = !s.spare_device[in.at.range->dev].empty() || f == freed.end();
    if (!spare) {
      in.device = f->second.device;
      gpu_wait(f->second.copied, in_stream, in_pt);  // its copy out first
      give_event(s, f->second.copied);
      freed.erase(f);
    } else {
      r = take_device(s, in.at.size(), in.at.range->dev, &in.device);
      if (r == CUDA_SUCCESS && (r = give_side(in.device)) != CUDA_SUCCESS) give_device(s, in.device);
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
    const int dev = driver::current_device();
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
  for (const Backing& d : spent_devices) give_device(s, d);
}

void finish_copies() {
  if (options().swap_order != SwapOrder::scan) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  State& s = state();
  std::lock_guard lock(s.mu);
  ++s.unscanned_open;
  std::vector<uintptr_t> parked;
  for (auto& [base, range] : s.ranges) {
    if (range.chunk.parked) parked.push_back(base);
  }
  map_parked(s, parked);
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

void unpark(uintptr_t addr) {
  if (g_parked.load(std::memory_order_relaxed) == 0) return;  // moves hold the lock across GPU waits
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!slab_of(s, addr)) return;
  std::vector<uintptr_t> bases{chunk_of(addr)};
  map_parked(s, bases);
}

void begin_queue() {
  State& s = state();
  std::lock_guard lock(s.mu);
  ++s.queueing;
}

void end_queue() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.queueing > 0) --s.queueing;
  s.queued.notify_all();
}

void count_scanned_transfer() { g_scanned_transfers.fetch_add(1, std::memory_order_relaxed); }

void await_ready(const uintptr_t* bases, size_t n, CUstream stream, bool per_thread) {
  if (n == 0) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  State& s = state();
  std::lock_guard lock(s.mu);
  std::vector<uintptr_t> parked;  // left where they are, read over the link
  for (size_t k = 0; k < n; ++k) {
    const uintptr_t base = bases[k];
    auto it = s.ranges.find(base);
    if (it == s.ranges.end()) continue;
    ++it->second.in_flight;  // until its mark
    if (it->second.chunk.parked) parked.push_back(base);
    if (!it->second.ready.event) continue;
    Mark& ready = it->second.ready;
    CUresult q = call_real(GMS_REAL(cuEventQuery), ready.event);
    if (q == CUDA_SUCCESS) {
      give_event(s, ready);
    } else if (call_real(GMS_REAL(cuStreamWaitEvent), driver::stream_handle(stream, per_thread), ready.event, 0u) != CUDA_SUCCESS) {
      call_real(GMS_REAL(cuEventSynchronize), ready.event);
    }
  }
  map_parked(s, parked);
}

void mark_used(const uintptr_t* bases, size_t n, CUstream stream, bool per_thread, bool unmarked, bool launched) {
  constexpr size_t kMaxStreams = 4;  // per range; past it the oldest mark is waited for and reused
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  State& s = state();
  const CUstream handle = driver::stream_handle(stream, per_thread);
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
