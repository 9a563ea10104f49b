#include "copy.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "act/config.h"
#include "act/host_pool.h"
#include "act/residency.h"
#include "act/staging.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/runtime.h"
#include "driver/calls.h"
#include "policy/pinning.h"
#include "trace/cuda_backend.h"
#include "trace/trace.h"

namespace gms::act {
namespace {

using driver::call_real;

uintptr_t page() {
  static const uintptr_t p = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// One registration of the shim's: the page-aligned interior of a host block.
struct Registration {
  uintptr_t lo, hi;
  uint64_t serial;
};

struct State {
  std::mutex mu;
  policy::RegistrationCache cache{0};
  std::map<uintptr_t, Registration> by_addr;        // lo -> registration, for range invalidation
  std::unordered_map<uint64_t, uintptr_t> by_serial;  // block serial -> lo
  std::unordered_map<uint64_t, uint32_t> copies;      // block serial -> copies seen
};

State* g_child_state = nullptr;  // in a fork child: its own

State& state() {
  if (g_child_state) return *g_child_state;
  static NoDestructor<State> s;
  return *s;
}
std::atomic<uint64_t> g_registrations{0};  // the fast "none at all" check of the invalidation hooks
// Registrations the shim started, ever (see copy_pageable: a copy the driver takes meanwhile).
std::atomic<uint64_t> g_register_starts{0};

policy::RegisterMode register_mode() {
  switch (options().register_mode) {
    case RegisterMode::always:
      return policy::RegisterMode::always;
    case RegisterMode::off:
      return policy::RegisterMode::off;
    default:
      return policy::RegisterMode::auto_;
  }
}

uint64_t register_limit() {
  static const uint64_t limit = [] {
    uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    return options().register_limit.resolve(ram);
  }();
  return limit;
}


// Caller holds s.mu. Drops one registration; a failed unregister keeps it registered (and so in
// by_addr: its address range stays blocked for the shim), as the driver still has it.
void drop(State& s, uintptr_t lo, Decision why) {
  auto it = s.by_addr.find(lo);
  if (it == s.by_addr.end()) return;
  Registration r = it->second;
  uint64_t t0 = trace::monotonic_ns();
  CUresult res = exiting() ? CUDA_SUCCESS : call_real(GMS_REAL(cuMemHostUnregister), reinterpret_cast<void*>(r.lo));
  uint64_t took = trace::monotonic_ns() - t0;
  Stats& st = runtime_stats();
  st.time(Timing::unregister_ns, took);
  s.cache.erase(r.serial);
  s.by_serial.erase(r.serial);
  if (res != CUDA_SUCCESS) {
    Line l;
    l.str("cuMemHostUnregister of ").bytes(r.hi - r.lo).str(" at ").hex(r.lo).str(" failed (error ").i64(res)
        .str("); the range stays registered and is not used again");
    log(LogLevel::warn, l);
    it->second.serial = 0;  // no block owns it any more
    return;
  }
  s.by_addr.erase(it);
  g_registrations.fetch_sub(1, std::memory_order_relaxed);
  if (trace::enabled()) trace::host_unregistered(r.lo, r.hi - r.lo, took, why == Decision::cache_evicted ? "evict" : "free");
  st.decision(Decision::unregistered, r.hi - r.lo);
  st.decision(why, r.hi - r.lo);
  st.live_sub(MemKind::shim_registered, r.hi - r.lo);
}

// Caller holds s.mu. Registers the block's interior; true on success.
bool enroll(State& s, const Region& block, uintptr_t lo, uintptr_t hi) {
  for (uint64_t victim : s.cache.insert(block.serial, hi - lo)) {
    auto v = s.by_serial.find(victim);
    if (v != s.by_serial.end()) drop(s, v->second, Decision::cache_evicted);
  }
  // A read-only file mapping (np.load(mmap_mode='r')) can only be registered read-only.
  bool read_only = block.origin == Origin::mmap_file && !(block.flags & PROT_WRITE);
  unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | (read_only ? CU_MEMHOSTREGISTER_READ_ONLY : 0u);
  g_register_starts.fetch_add(1);
  uint64_t t0 = trace::monotonic_ns();
  CUresult r = call_real(GMS_REAL(cuMemHostRegister_v2), reinterpret_cast<void*>(lo), hi - lo, flags);
  uint64_t took = trace::monotonic_ns() - t0;
  Stats& st = runtime_stats();
  st.time(Timing::register_ns, took);
  if (trace::enabled()) {
    const char* why = register_mode() == policy::RegisterMode::always ? "always"
                      : s.copies[block.serial] > 1                    ? "reuse"
                                                                      : "auto";
    trace::host_registered(lo, hi - lo, took, r == CUDA_SUCCESS ? "ok" : trace::cuda_error_name(r), why);
  }
  if (r != CUDA_SUCCESS) {
    s.cache.erase(block.serial);
    if (log_enabled(LogLevel::info)) {
      Line l;
      l.str("cuMemHostRegister of ").bytes(hi - lo).str(" failed (error ").i64(r).str("): copying the ordinary way");
      log(LogLevel::info, l);
    }
    return false;
  }
  s.by_addr[lo] = Registration{lo, hi, block.serial};
  s.by_serial[block.serial] = lo;
  g_registrations.fetch_add(1, std::memory_order_relaxed);
  st.decision(Decision::registered, hi - lo);
  st.live_add(MemKind::shim_registered, hi - lo);
  return true;
}

// The async form of the program's call on the same stream: pinned memory makes it truly async.
CUresult dma(const HostCopy& c, size_t off, size_t n, CUstream s) {
  char* h = static_cast<char*>(c.host) + off;
  return c.dir == HostCopyDir::htod ? call_real(GMS_REAL(cuMemcpyHtoDAsync_v2), c.dev + off, h, n, s)
                                    : call_real(GMS_REAL(cuMemcpyDtoHAsync_v2), h, c.dev + off, n, s);
}

// An async upload may return once its source is consumed, not copied. Waiting for the whole DMA of
// a registered block leaves the link idle from the end of the DMA until the program's next call
// starts one: the calling thread copies the last part into the shim's staging while the DMA of the
// rest runs, and that part's DMA, queued behind, covers the program's gap. Measured on the H100,
// S2's .to() (40 MB), interleaved batches, 3 runs: waiting for all 0.91-0.97x of a pinned tensor,
// a 4 MiB tail 0.97-0.99x; 1 to 3 MiB in between. The copy crew's threads copying the tail made it
// worse (0.86-0.93x): the CPU's copies slow the copy engine's reads of host memory.
constexpr size_t kTailMin = 16u << 20;  // smaller copies: a short DMA, a short wait
constexpr size_t kTail = 4u << 20;      // 75 us of DMA; one thread copies it in 0.4 ms, under the rest's DMA

size_t upload_tail(const HostCopy& c) {
  if (c.dir != HostCopyDir::htod || !c.async || c.bytes < kTailMin || !options().stage.value) return 0;
  return std::min(kTail, c.bytes / 8);
}

// An event of the shim's own, recorded on `s` when made: wait() returns once the work queued there
// before it is done. Destroyed with the object.
class StreamMark {
 public:
  explicit StreamMark(CUstream s)
      : status_(call_real(GMS_REAL(cuEventCreate), &ev_, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING))) {
    if (status_ == CUDA_SUCCESS) status_ = call_real(GMS_REAL(cuEventRecord), ev_, s);
  }
  ~StreamMark() {
    if (ev_) call_real(GMS_REAL(cuEventDestroy_v2), ev_);
  }
  StreamMark(const StreamMark&) = delete;
  StreamMark& operator=(const StreamMark&) = delete;
  CUresult status() const { return status_; }
  CUresult wait() const { return status_ == CUDA_SUCCESS ? call_real(GMS_REAL(cuEventSynchronize), ev_) : status_; }

 private:
  CUevent ev_ = nullptr;
  CUresult status_;
};

// The bytes [off, c.bytes) of an upload whose earlier part is queued on `s`: through staging, then
// wait for the earlier part. Nullopt when staging is busy with another copy (nothing was done).
std::optional<CUresult> stage_tail(const HostCopy& c, size_t off, CUstream s) {
  StreamMark rest(s);
  if (rest.status() != CUDA_SUCCESS) return std::nullopt;
  std::optional<CUresult> r = try_staged_htod(c.dev + off, static_cast<const char*>(c.host) + off, c.bytes - off, s);
  if (r && *r == CUDA_SUCCESS) r = rest.wait();  // the rest has been read
  if (r && *r == CUDA_SUCCESS) runtime_stats().decision(Decision::tail_staged, c.bytes - off);
  return r;
}

// The registered interior [lo, hi) covers part of the copy: the edges go the ordinary way (the
// driver stages them), the middle at pinned speed, all on the program's stream and in order.
CUresult copy_registered(const HostCopy& c, uintptr_t lo, uintptr_t hi) {
  uintptr_t a = reinterpret_cast<uintptr_t>(c.host), b = a + c.bytes;
  uintptr_t mid_lo = a > lo ? a : lo, mid_hi = b < hi ? b : hi;
  uintptr_t cut = b - upload_tail(c);  // [cut, b) through staging
  if (cut < mid_lo || cut > mid_hi) cut = b;
  CUstream s = driver::stream_handle(c.stream, c.per_thread);
  CUresult r = CUDA_SUCCESS;
  if (mid_lo > a) r = dma(c, 0, mid_lo - a, s);
  if (r == CUDA_SUCCESS) r = dma(c, mid_lo - a, std::min(mid_hi, cut) - mid_lo, s);
  if (r == CUDA_SUCCESS && cut < b) {
    if (std::optional<CUresult> early = stage_tail(c, cut - a, s)) return *early;
    if (mid_hi > cut) r = dma(c, cut - a, mid_hi - cut, s);
  }
  if (r == CUDA_SUCCESS && b > mid_hi) r = dma(c, mid_hi - a, b - mid_hi, s);
  // The program may reuse (host to device) or read (device to host) its buffer as soon as the call
  // returns, as it could with pageable memory: wait for the copy. Synchronous calls wait anyway.
  if (r == CUDA_SUCCESS) r = call_real(GMS_REAL(cuStreamSynchronize), s);
  return r;
}

}  // namespace

CUresult copy_pageable(const HostCopy& c, CUresult (*ordinary)(void*), void* ctx) {
  policy::RegisterMode mode = register_mode();
  bool stage = options().stage.value;
  if (passthrough() || (mode == policy::RegisterMode::off && !stage) || c.bytes == 0) return ordinary(ctx);
  ShimScope scope;
  uintptr_t a = reinterpret_cast<uintptr_t>(c.host);
  auto block = host_blocks().find(a);
  bool inside = block && a + c.bytes <= block->end();
  uintptr_t lo = 0, hi = 0;
  if (inside) {
    lo = (block->base + page() - 1) & ~(page() - 1);
    hi = block->end() & ~(page() - 1);
    if (hi <= lo) inside = false;
  }
  State& s = state();
  std::unique_lock lock(s.mu);
  if (s.cache.limit() == 0) s.cache = policy::RegistrationCache(register_limit());
  policy::CopyRequest req;
  req.bytes = c.bytes;
  req.block_known = inside;
  req.block_bytes = hi - lo;
  req.block_registered = inside && s.by_serial.count(block->serial);
  // History of freed blocks is never looked up again; rather than follow every free, the map is
  // bounded: forgetting only delays a registration (a million .cpu() calls make a million blocks).
  if (s.copies.size() > 4096) s.copies.clear();
  req.earlier_copies = inside ? s.copies[block->serial]++ : 0;
  req.host_is_source = c.dir == HostCopyDir::htod;
  req.fits_cache = inside && hi - lo <= s.cache.limit();
  req.may_stage = stage;
  req.recycled = inside && pool::owns(c.host);
  policy::CopyPath path = policy::choose_copy_path(policy::CopyCosts{}, mode, req);
  // In a capture, the graph would keep the shim's staging buffer (reused at once) or a registration
  // (dropped when the memory goes): the driver refuses pageable copies there, and so should the copy.
  if (path != policy::CopyPath::driver && driver::stream_capturing(c.stream, c.per_thread)) {
    path = policy::CopyPath::driver;
  }
  Stats& st = runtime_stats();
  if (path == policy::CopyPath::register_block && !enroll(s, *block, lo, hi)) path = stage ? policy::CopyPath::staged : policy::CopyPath::driver;
  if (path == policy::CopyPath::registered) {
    s.cache.touch(block->serial);
    st.decision(Decision::cache_hit, c.bytes);
  }
  uint64_t starts = g_register_starts.load();  // under the lock: before any registration of the block
  lock.unlock();
  switch (path) {
    case policy::CopyPath::registered:
    case policy::CopyPath::register_block:
      st.decision(Decision::copy_registered, c.bytes);
      trace::copy_path(trace::CopyPath::registered);
      return copy_registered(c, lo, hi);
    case policy::CopyPath::staged: {
      st.decision(Decision::copy_staged, c.bytes);
      trace::copy_path(trace::CopyPath::staged);
      CUstream s2 = driver::stream_handle(c.stream, c.per_thread);
      return c.dir == HostCopyDir::htod ? staged_htod(c.dev, c.host, c.bytes, s2, !c.async)
                                        : staged_dtoh(c.host, c.dev, c.bytes, s2);
    }
    case policy::CopyPath::driver:
      break;
  }
  // Another thread may register this block while the driver takes the copy, and a driver that
  // finds the block pinned when it looks queues an async copy and returns before its DMA ends,
  // which a pageable copy never does: a registration started since this copy was decided is
  // waited out.
  CUresult r = ordinary(ctx);
  if (r == CUDA_SUCCESS && c.async && inside && g_register_starts.load() != starts) {
    r = StreamMark(driver::stream_handle(c.stream, c.per_thread)).wait();
  }
  return r;
}

bool copy_host_placed(HostCopyDir dir, void* host, CUdeviceptr dev, size_t bytes, CUstream stream, bool async,
                      bool per_thread, CUresult* result) {
  // Small copies gain nothing from the crew; only placement makes such memory, and while it has
  // made none (the default policy, spill, until the card is full) no copy looks it up.
  if (bytes < (1u << 20) || passthrough() || !placement_active() || ledger().created() == 0) return false;
  ShimScope scope;
  auto r = cuda_regions().find(static_cast<uintptr_t>(dev));
  if (!r || static_cast<uintptr_t>(dev) + bytes > r->end()) return false;
  uintptr_t at = 0;
  if (r->placement == Placement::pinned && r->host_alias) {
    at = r->host_alias + (static_cast<uintptr_t>(dev) - r->base);
  } else if (r->placement == Placement::managed && residency_on_host(r->base)) {
    at = static_cast<uintptr_t>(dev);  // managed memory has one address on the host and the device
  } else {
    return false;
  }
  if (driver::stream_capturing(stream, per_thread)) return false;  // the graph gets the driver's copy
  // Ordered after exactly the work the copy would have waited for: an event recorded on the copy's
  // own stream (synchronous copies: the default stream of the call's kind) completes when that work
  // does, the implicit waits between the legacy default stream and blocking streams included.
  CUresult e = StreamMark(driver::stream_handle(async ? stream : nullptr, per_thread)).wait();
  if (e != CUDA_SUCCESS) {
    *result = e;
    return true;
  }
  void* placed = reinterpret_cast<void*>(at);
  bool done = dir == HostCopyDir::htod ? crew_memcpy(placed, host, bytes) : crew_memcpy(host, placed, bytes);
  if (!done) return false;
  runtime_stats().decision(Decision::copy_on_host, bytes);
  trace::copy_path(trace::CopyPath::host);
  *result = CUDA_SUCCESS;
  return true;
}

namespace {
bool in_pinned(const void* p, size_t bytes) {
  auto r = cuda_regions().find(reinterpret_cast<uintptr_t>(p));
  return r && r->kind == MemKind::pinned_host && reinterpret_cast<uintptr_t>(p) + bytes <= r->end();
}
}  // namespace

bool copy_by_crew(void* dst, const void* src, size_t bytes) {
  uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  bool apart = d + bytes <= s || s + bytes <= d;  // slices copied at once: an overlap is libc's
  if (bytes < kCrewCopyMin || !apart || in_shim() || passthrough() || !options().stage.value) return false;
  ShimScope scope;
  if (!in_pinned(dst, bytes) && !in_pinned(src, bytes)) return false;
  if (!crew_memcpy(dst, src, bytes, IfBusy::give_up)) return false;
  runtime_stats().decision(Decision::memcpy_crew, bytes);
  return true;
}

void host_range_going(uintptr_t lo, uintptr_t hi) {
  if (g_registrations.load(std::memory_order_relaxed) == 0) return;
  ShimScope scope;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.by_addr.upper_bound(lo);
  if (it != s.by_addr.begin()) --it;
  while (it != s.by_addr.end() && it->first < hi) {
    auto next = std::next(it);
    if (it->second.hi > lo) drop(s, it->first, Decision::invalidated);
    it = next;
  }
}

void before_program_registers(uintptr_t lo, uintptr_t hi) { host_range_going(lo, hi); }

namespace {
// Registrations are the parent's (a child has no CUDA context of its own): the child starts from
// a new, empty state and leaves the parent's alone. No lock is taken around fork: a thread of the
// parent may be inside the driver with the lock held, and the driver's own fork handlers may wait
// for that thread.
void fork_child() {
  ShimScope scope;
  g_child_state = new State();
  g_registrations.store(0, std::memory_order_relaxed);
}
}  // namespace

void copy_init() { pthread_atfork(nullptr, nullptr, fork_child); }

}  // namespace gms::act
