#include "act/tables.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "act/config.h"
#include "act/swap.h"
#include "act/tracked.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/options.h"
#include "core/runtime.h"
#include "driver/calls.h"
#include "policy/pointer_tables.h"

namespace gms::act::tables {
namespace {

using driver::call_real;

// What a function does with the small buffers it is given, once learnt.
// late: its first check's launch did not end in time; a second such check makes it a writer.
enum class Writes : uint8_t { unknown, late, no, tables };

struct State {
  std::mutex mu;  // guards everything below; taken inside the residency lock, never around it
  policy::PointerTables tables;
  std::unordered_map<CUfunction, Writes> functions;
  // Addresses copied into device memory no allocation of the program's holds (a `__device__` or
  // `__constant__` variable, cudaMemcpyToSymbol): any kernel of the module may read them, so every
  // launch is ordered against them. More than kEverywhere: every launch is work no scan sees.
  std::vector<uintptr_t> everywhere;
  bool everywhere_anything = false;
};
constexpr size_t kEverywhere = 64;
// Whether there is any table or `everywhere` address: launches with no movable argument skip the
// lock while there is none.
std::atomic<bool> g_any{false};

State& state() {
  static NoDestructor<State> s;
  return *s;
}

// The calling thread's launch whose small buffers are to be read after it (at most one pending).
struct Check {
  static constexpr size_t kMax = 8;
  static constexpr size_t kMaxMovable = 32;
  CUfunction f;
  uintptr_t base[kMax];
  uint64_t size[kMax];
  uint32_t n;
  uintptr_t movable[kMaxMovable];  // what the launch was given
  uint32_t n_movable;
  bool pending;
};
thread_local Check t_check __attribute__((tls_model("initial-exec"))) = {};

// Whether `w` points into movable memory; `base`/`size`: the allocation's.
bool movable_at(uintptr_t w) {
  if (w < g_tracked_lo.load(std::memory_order_relaxed) || w >= g_tracked_hi.load(std::memory_order_relaxed)) return false;
  auto r = cuda_regions().find(w);
  return r && r->placement == Placement::swap;
}

// The addresses among the words of `bytes` read from a buffer that matter to a kernel reading it:
// of movable memory, or of a table (which leads to movable memory). Caller holds s.mu.
std::vector<policy::PointerTables::Word> addresses_in(const unsigned char* p, uint64_t bytes,
                                                      const policy::PointerTables& tables) {
  std::vector<policy::PointerTables::Word> out;
  for (uint64_t k = 0; k + sizeof(uintptr_t) <= bytes; k += sizeof(uintptr_t)) {
    uintptr_t w;
    std::memcpy(&w, p + k, sizeof(w));
    if (movable_at(w) || (tables.in_span(w) && tables.reach(w))) out.push_back({k, w});
  }
  return out;
}

// The buffer's region, if it still is the allocation the table was learnt in.
bool same_allocation(uintptr_t w, uint64_t base, uint64_t size) {
  auto r = cuda_regions().find(w);
  return r && r->base == base && r->size == size;
}

// The allocations' bases of addresses of movable memory: what a kernel's writes are kept as (an
// address inside an allocation, which a loop may step through, names the same allocation).
std::vector<uintptr_t> bases_of(const uintptr_t* w, size_t n) {
  std::vector<uintptr_t> out;
  for (size_t i = 0; i < n; ++i) {
    auto r = cuda_regions().find(w[i]);
    const uintptr_t b = r ? r->base : w[i];
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  }
  return out;
}

// Waits (a bounded time) for the event; false if the work is not over by then, as when it waits
// for something the program does after the launch.
bool wait_bounded(CUevent e) {
  for (int i = 0; i < 200; ++i) {
    CUresult q = call_real(GMS_REAL(cuEventQuery), e);
    if (q == CUDA_SUCCESS) return true;
    if (q != CUDA_ERROR_NOT_READY) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return false;
}

}  // namespace

bool active() { return scan_order() && g_tracked_regions.load(std::memory_order_relaxed) != 0; }

void host_wrote(uintptr_t dst, const void* src, size_t n) {
  if (!active() || !src) return;
  State& s = state();
  ShimScope scope;
  const policy::PointerTablesConfig& cfg = s.tables.config();
  auto r = cuda_regions().find(dst);
  if (!r) {
    if (n > cfg.max_copy_bytes) return;
    std::lock_guard lock(s.mu);
    std::vector<policy::PointerTables::Word> words = addresses_in(static_cast<const unsigned char*>(src), n, s.tables);
    for (const auto& w : words) {
      if (std::find(s.everywhere.begin(), s.everywhere.end(), w.value) != s.everywhere.end()) continue;
      if (s.everywhere.size() == kEverywhere) {
        s.everywhere_anything = true;
        break;
      }
      s.everywhere.push_back(w.value);
    }
    g_any.store(!s.tables.empty() || !s.everywhere.empty() || s.everywhere_anything, std::memory_order_relaxed);
    return;
  }
  if (r->kind == MemKind::pinned_host || r->kind == MemKind::registered_host || dst + n > r->end()) return;
  std::lock_guard lock(s.mu);
  std::vector<policy::PointerTables::Word> words;
  if (n <= cfg.max_copy_bytes) words = addresses_in(static_cast<const unsigned char*>(src), n, s.tables);
  const uint64_t offset = dst - r->base;
  for (auto& w : words) w.offset += offset;
  // A large copy is data: it holds no table's addresses any more (stored with none found).
  s.tables.stored(r->base, r->size, offset, n, words);
  g_any.store(!s.tables.empty() || !s.everywhere.empty() || s.everywhere_anything, std::memory_order_relaxed);
}

void device_copied(uintptr_t dst, uintptr_t src, size_t n) {
  if (!g_any.load(std::memory_order_relaxed)) return;
  State& s = state();
  ShimScope scope;
  auto d = cuda_regions().find(dst);
  auto f = cuda_regions().find(src);
  if (!d || dst + n > d->end()) return;
  std::lock_guard lock(s.mu);
  if (s.tables.empty()) return;
  if (!f) {
    s.tables.cleared(d->base, dst - d->base, n);
    return;
  }
  s.tables.copied(d->base, d->size, dst - d->base, f->base, src - f->base, n);
}

void cleared(uintptr_t dst, size_t n) {
  if (!g_any.load(std::memory_order_relaxed)) return;
  State& s = state();
  ShimScope scope;
  auto d = cuda_regions().find(dst);
  if (!d) return;
  std::lock_guard lock(s.mu);
  if (!s.tables.empty()) s.tables.cleared(d->base, dst - d->base, n);
}

void freed(uintptr_t base, uint64_t size) {
  if (!g_any.load(std::memory_order_relaxed)) return;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.tables.freed(base);
  std::erase_if(s.everywhere, [&](uintptr_t v) { return v >= base && v < base + size; });
  g_any.store(!s.tables.empty() || !s.everywhere.empty() || s.everywhere_anything, std::memory_order_relaxed);
}

void at_launch(CUfunction f, const std::vector<uintptr_t>& words, const std::vector<uintptr_t>& movable, Reached* out) {
  if (movable.empty() && !g_any.load(std::memory_order_relaxed)) return;
  State& s = state();
  std::lock_guard lock(s.mu);
  out->ordered.insert(out->ordered.end(), s.everywhere.begin(), s.everywhere.end());
  out->anything = out->anything || s.everywhere_anything;
  if (!s.tables.empty()) {
    // Tables reached through tables too (a parameter block that names arrays of pointers), a few
    // levels deep; what a kernel may have written only orders, at every level below it.
    constexpr int kDepth = 4;
    constexpr size_t kTables = 64;
    struct Next {
      uintptr_t addr;
      int depth;
      bool maybe;
    };
    std::vector<Next> next;
    for (uintptr_t w : words) next.push_back({w, 0, false});
    for (uintptr_t w : s.everywhere) next.push_back({w, 1, true});  // a module variable naming a table
    std::vector<uint64_t> seen;
    while (!next.empty() && seen.size() < kTables) {
      const Next at = next.back();
      next.pop_back();
      uint64_t base = 0, size = 0;
      const policy::PointerTables::Reach* r = s.tables.reach(at.addr, &base, &size);
      if (!r || std::find(seen.begin(), seen.end(), base) != seen.end()) continue;
      if (!same_allocation(at.addr, base, size)) {
        s.tables.freed(base);  // freed since (and maybe made again): what it held is gone
        continue;
      }
      seen.push_back(base);
      std::vector<uintptr_t>& stored = at.maybe ? out->ordered : out->used;
      stored.insert(stored.end(), r->stored.begin(), r->stored.end());
      out->ordered.insert(out->ordered.end(), r->maybe.begin(), r->maybe.end());
      out->anything = out->anything || r->anything;
      if (at.depth + 1 >= kDepth) continue;
      for (uintptr_t v : r->stored) next.push_back({v, at.depth + 1, at.maybe});
      for (uintptr_t v : r->maybe) next.push_back({v, at.depth + 1, true});
    }
  }
  if (movable.empty()) return;
  Writes& writes = s.functions[f];
  if (writes == Writes::no || (writes != Writes::tables && t_check.pending)) return;
  // The small buffers of device memory (ordinary or movable) the kernel is given.
  Check c{};
  c.f = f;
  for (uintptr_t w : words) {
    if (c.n == Check::kMax) break;
    auto r = cuda_regions().find(w);
    if (!r || r->kind != MemKind::device || r->device < 0 || r->size > s.tables.config().max_table_bytes ||
        std::find(c.base, c.base + c.n, r->base) != c.base + c.n) {
      continue;
    }
    c.base[c.n] = r->base;
    c.size[c.n++] = r->size;
  }
  if (c.n == 0) return;
  if (writes == Writes::tables) {
    const std::vector<uintptr_t> given = bases_of(movable.data(), movable.size());
    for (uint32_t i = 0; i < c.n; ++i) s.tables.may_hold(c.base[i], c.size[i], given);
    g_any.store(true, std::memory_order_relaxed);
    return;
  }
  for (uintptr_t w : movable) {
    if (c.n_movable < Check::kMaxMovable) c.movable[c.n_movable++] = w;
  }
  c.pending = true;
  t_check = c;
}

void after_launch(CUstream stream, bool per_thread, bool launched) {
  if (!t_check.pending) return;
  const Check c = t_check;
  t_check.pending = false;
  if (!launched) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;  // another thread may be capturing in global mode
  if (driver::stream_capturing(stream, per_thread)) return;  // learnt at a later launch
  CUevent e = nullptr;
  if (call_real(GMS_REAL(cuEventCreate), &e, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) return;
  const bool over = call_real(GMS_REAL(cuEventRecord), e, driver::stream_handle(stream, per_thread)) == CUDA_SUCCESS &&
                    wait_bounded(e);
  call_real(GMS_REAL(cuEventDestroy_v2), e);
  State& s = state();
  if (!over) {
    // The work ahead of it did not end in time. Once: checked again at a later launch. Twice: taken
    // for a writer of tables, so that no reader of its buffers is missed, rather than waited for
    // again at each launch.
    std::lock_guard lock(s.mu);
    Writes& w = s.functions[c.f];
    if (w == Writes::unknown) {
      w = Writes::late;
      return;
    }
    w = Writes::tables;
    const std::vector<uintptr_t> given = bases_of(c.movable, c.n_movable);
    for (uint32_t i = 0; i < c.n; ++i) s.tables.may_hold(c.base[i], c.size[i], given);
    g_any.store(true, std::memory_order_relaxed);
    return;
  }
  constexpr uint64_t kRead = 64 << 10;  // a table starts its buffer
  std::vector<unsigned char> bytes;
  bool writes = false;
  for (uint32_t i = 0; i < c.n; ++i) {
    const uint64_t n = std::min(c.size[i], kRead);
    bytes.resize(n);
    if (swap::read(bytes.data(), c.base[i], n) != CUDA_SUCCESS) return;  // checked again at a later launch
    std::lock_guard lock(s.mu);
    std::vector<policy::PointerTables::Word> words = addresses_in(bytes.data(), n, s.tables);
    if (words.empty()) continue;
    // Only addresses the buffer did not hold already: a kernel that reads a table a copy filled
    // writes none.
    if (s.tables.news(c.base[i], c.size[i], words) == 0) continue;
    writes = true;
    s.tables.stored(c.base[i], c.size[i], 0, n, words);
    g_any.store(true, std::memory_order_relaxed);
  }
  std::lock_guard lock(s.mu);
  s.functions[c.f] = writes ? Writes::tables : Writes::no;
  if (writes && log_enabled(LogLevel::debug)) {
    Line l;
    l.str("function ").hex(reinterpret_cast<uintptr_t>(c.f)).str(" writes addresses of movable memory into buffers it is given: its readers use them");
    log(LogLevel::debug, l);
  }
}

}  // namespace gms::act::tables
