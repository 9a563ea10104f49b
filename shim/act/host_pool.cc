#include "host_pool.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <new>

#include "act/copy.h"
#include "core/guard.h"
#include "core/log.h"
#include "observe/observe.h"
#include "core/runtime.h"
#include "driver/cuda_driver.h"
#include "driver/libc.h"
#include "policy/host_pool.h"

namespace gms::act::pool {

std::atomic<uintptr_t> g_lo{0}, g_span{0};

namespace {

constexpr uintptr_t kAlign = 2u << 20;  // blocks can be backed by transparent huge pages

// Built once in init, never destroyed: the program may free pool blocks from its own destructors.
struct Pool {
  std::mutex mu;
  policy::HostPool books;
  explicit Pool(const policy::HostPool::Config& c) : books(c) {}
};
Pool* g_pool = nullptr;
alignas(Pool) unsigned char g_pool_storage[sizeof(Pool)];

uintptr_t page() {
  static const uintptr_t p = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// Back to reserved, unbacked address space: the pages go back to the system, the range stays the
// pool's (MAP_FIXED replaces the mapping in one step, so no other mmap can take it meanwhile).
bool unback(uintptr_t lo, uintptr_t hi) {
  void* p = libc::mmap(reinterpret_cast<void*>(lo), hi - lo, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p != MAP_FAILED;
}

void make_writable(uintptr_t lo, size_t n) { mprotect(reinterpret_cast<void*>(lo), n, PROT_READ | PROT_WRITE); }

bool back(uintptr_t lo, uintptr_t hi) {
  void* p = libc::mmap(reinterpret_cast<void*>(lo), hi - lo, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) return false;
  // Huge pages where the system allows them (THP "madvise" or "always"); refused is fine.
  libc::madvise(p, hi - lo, MADV_HUGEPAGE);
  return true;
}

// No lock is taken around fork (a thread may hold the pool's lock while the driver unregisters a
// block, and the driver's fork handlers may wait for it). A child that finds the lock taken cannot
// trust the books: it stops using the pool, and leaves the blocks it has as they are.
bool g_child_off = false;
void fork_child() {
  if (g_pool->mu.try_lock()) {
    g_pool->mu.unlock();
    return;
  }
  new (&g_pool->mu) std::mutex();
  g_child_off = true;
  Line l;
  l.str("host pool: forked while another thread changed it; this process allocates from glibc (its pool blocks stay valid)");
  log(LogLevel::warn, l);
}

}  // namespace

namespace {

// Set at load when the options want a pool; the reservation waits for the CUDA driver (start).
std::atomic<bool> g_wanted{false};
std::mutex g_start_mu;

void reserve() {
  const SizeOrPercent& opt = options().host_pool;
  ShimScope scope;
  uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * page();
  uint64_t bound = opt.resolve(ram) / page() * page();
  if (bound < host_threshold()) return;
  // Twice the bound of address space, so that blocks of changing sizes rarely find it too
  // fragmented; none of it is backed until a block is handed out.
  uintptr_t span = (2 * bound + kAlign - 1) & ~(kAlign - 1);
  void* r = libc::mmap(nullptr, span + kAlign, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) {
    Line l;
    l.str("GPUMEMSHIM_HOST_POOL: cannot reserve ").bytes(span).str(" of address space: the pool is off");
    log(LogLevel::warn, l);
    return;
  }
  uintptr_t lo = (reinterpret_cast<uintptr_t>(r) + kAlign - 1) & ~(kAlign - 1);
  if (lo > reinterpret_cast<uintptr_t>(r)) libc::munmap(r, lo - reinterpret_cast<uintptr_t>(r));
  uintptr_t tail = reinterpret_cast<uintptr_t>(r) + span + kAlign;
  if (tail > lo + span) libc::munmap(reinterpret_cast<void*>(lo + span), tail - (lo + span));
  policy::HostPool::Config c;
  c.base = lo;
  c.span = span;
  c.bound = bound;
  c.page = page();
  c.granule = kAlign;
  g_pool = new (g_pool_storage) Pool(c);
  pthread_atfork(nullptr, nullptr, fork_child);
  g_lo.store(lo, std::memory_order_relaxed);
  g_span.store(span, std::memory_order_release);
  if (log_enabled(LogLevel::info)) {
    Line l;
    l.str("host pool: ").bytes(bound).str(" for blocks of at least ").bytes(host_threshold());
    log(LogLevel::info, l);
  }
}

}  // namespace

void init() {
  const SizeOrPercent& opt = options().host_pool;
  g_wanted.store(!passthrough() && (opt.is_percent || opt.bytes != 0), std::memory_order_relaxed);
}

bool start() {
  // A process that never loads the CUDA driver copies nothing at pinned speed: its large blocks
  // stay glibc's, and no address space is reserved (issue 28: every exec paid for it).
  if (!g_wanted.load(std::memory_order_relaxed) || !driver::g_loaded.load(std::memory_order_acquire) ||
      !driver::libcuda_handle()) {
    return false;
  }
  ShimScope scope;
  std::lock_guard lock(g_start_mu);
  if (g_wanted.exchange(false, std::memory_order_relaxed)) reserve();
  return on();
}

void* take(size_t n, size_t align, Origin origin, bool zero) {
  // Blocks under half a granule stay glibc's whatever HOST_THRESHOLD says: each would cost a whole
  // 2 MiB granule (issue 28: a low threshold multiplied a Python import's resident memory).
  if (!g_pool || g_child_off || align > page() || n < kAlign / 2) return nullptr;
  ShimScope scope;
  Stats& st = runtime_stats();
  policy::HostPool::Grant g;
  {
    std::lock_guard lock(g_pool->mu);
    g = g_pool->books.acquire(n);
    // Blocks given back to make room: the shim's registration goes first (while the pages are
    // still there), then the pages.
    for (const policy::AddrRange& r : g.released) {
      host_range_going(r.lo, r.hi);
      unback(r.lo, r.hi);
      st.decision(Decision::pool_released, r.bytes());
    }
    if (!g.addr) return nullptr;
    if (g.fresh && !back(g.addr, g.addr + g.size)) {
      g_pool->books.discard(g.addr);
      return nullptr;  // out of memory for the pool: glibc may still have some
    }
    if (!g.tag) {
      g.tag = observe::new_host_serial();
      g_pool->books.set_tag(g.addr, g.tag);
    }
  }
  if (!g.fresh) {
    // The last owner may have changed its protection (a JIT's buffer): a malloc block is writable.
    make_writable(g.addr, g.size);
    // calloc: fresh pages are zeroes already; a recycled block holds its last owner's data.
    if (zero) std::memset(reinterpret_cast<void*>(g.addr), 0, g.size);
  }
  st.decision(g.fresh ? Decision::pool_new : Decision::pool_reused, g.size);
  observe::host_block_alloc(g.addr, g.size, origin, PROT_READ | PROT_WRITE, g.tag);
  return reinterpret_cast<void*>(g.addr);
}

void give(void* p) {
  ShimScope scope;
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  // The block leaves the registry before another thread can be handed it; its registration, if
  // the shim made one, stays with the pages for the next owner.
  observe::host_block_free(a);
  if (g_child_off) return;  // the books cannot be trusted: the block stays the child's
  bool ok;
  {
    std::lock_guard lock(g_pool->mu);
    ok = g_pool->books.release(a);
  }
  if (!ok) {
    Line l;
    l.str("free(").hex(a).str("): not a live block of the host pool (a double free, or a pointer inside a block); ignored");
    log(LogLevel::error, l);
  }
}

size_t usable(const void* p) {
  ShimScope scope;
  if (g_child_off) {
    // The books cannot be trusted here; the registry (its lock made anew at fork) still knows
    // the blocks this process holds.
    auto r = host_blocks().find(reinterpret_cast<uintptr_t>(p));
    return r && r->base == reinterpret_cast<uintptr_t>(p) ? r->size : 0;
  }
  std::lock_guard lock(g_pool->mu);
  return g_pool->books.live_size(reinterpret_cast<uintptr_t>(p));
}

}  // namespace gms::act::pool
