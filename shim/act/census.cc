#include "act/census.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdlib.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "act/cpu_pages.h"
#include "core/guard.h"
#include "policy/page_census.h"
#include "policy/turns.h"
#include "trace/trace.h"

namespace gms::act {

std::atomic<bool> g_census_on{false};

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMinBytes = policy::TurnsConfig{}.min_bytes;
// And larger ones too: a look reads 8 bytes a page, about 5 ms a GiB the CPU holds, under the
// census's lock on the launch path: past 16 GiB one look would stall launches for 80 ms or more.
constexpr uint64_t kMaxBytes = 16ull << 30;
// The looks may take this long before their share of the run is weighed: a short program's first
// looks (a few milliseconds for a few GiB) are no reason to stop.
constexpr uint64_t kFreeNs = 50'000'000;
constexpr uint64_t kShareOfRun = 50;  // at most 1/50 of the run: 2%

struct Watched {
  explicit Watched(uint64_t pages) : census(pages), bits(census.words()) {}
  policy::PageCensus census;
  std::vector<uint64_t> bits;  // the page table at the latest look
  uint64_t epoch = 0;          // the synchronisation epoch of its latest look
  bool gpu_used = false;       // a launch used it since its latest look
  bool gone = false;           // no longer mapped: never looked at again
};

enum class State : uint8_t { unknown, on, off, done };

struct Census {
  std::mutex mu;
  State state = State::unknown;
  std::unordered_map<uintptr_t, Watched> regions;
  uint64_t epoch = 1;  // synchronisations so far, plus one
  uint64_t started_ns = 0, spent_ns = 0;
};

Census* g_child = nullptr;  // a fork child's own (fork_child)
Census& census() {
  static Census* c = new Census();  // never destroyed: the exit handler runs beside other destructors
  return g_child ? *g_child : *c;
}

// A fork child's managed memory is its parent's, and another thread of the parent may have held the
// lock: the child counts nothing, with a lock of its own.
void fork_child() {
  g_census_on.store(false, std::memory_order_relaxed);
  g_child = new Census();
  g_child->state = State::done;
}

// Caller holds c.mu. The census ends for the rest of the run; the trace says why.
void stop(Census& c, const char* state, const char* why) {
  c.state = State::done;
  c.regions.clear();
  g_census_on.store(false, std::memory_order_relaxed);
  if (trace::enabled()) trace::census(state, why);
}

// Whether [base, base + 4096) is still mapped in this process: pagemap reads zeros for a range
// that is not, which would count every page the CPU held as gone to the GPU (a region the program
// leaked and the driver unmapped, at cudaDeviceReset or exit).
bool mapped(uintptr_t base) {
  unsigned char v = 0;
  return mincore(reinterpret_cast<void*>(base), kPage, &v) == 0 || errno != ENOMEM;
}

// Caller holds c.mu. False when the census stopped.
bool look(Census& c, uintptr_t base, Watched& w, trace::PagesAt at) {
  if (!trace::enabled()) {  // the trace stopped (a write error): nothing to count for
    stop(c, "stopped", "the trace stopped");
    return false;
  }
  const uint64_t t0 = trace::monotonic_ns();
  if (!mapped(base)) {
    w.gone = true;
    return true;
  }
  if (!read_cpu_pages(base, w.census.pages(), w.bits.data())) {
    stop(c, "stopped", "the page table could not be read");
    return false;
  }
  const policy::PageMoves m = w.census.look(w.bits.data(), w.gpu_used);
  w.gpu_used = false;
  w.epoch = c.epoch;
  if ((m.to_gpu || m.to_cpu) && trace::enabled()) {
    trace::pages(base, m.to_gpu * kPage, m.to_cpu * kPage, w.census.cpu_pages() * kPage, at);
  }
  const uint64_t t1 = trace::monotonic_ns();
  c.spent_ns += t1 - t0;
  if (c.spent_ns > kFreeNs && c.spent_ns * kShareOfRun > t1 - c.started_ns) {
    stop(c, "stopped", "its looks at the page table took more than 2% of the run: counts up to here");
    return false;
  }
  return true;
}

void at_exit() {
  if (!g_census_on.load(std::memory_order_relaxed)) return;
  ShimScope scope;
  Census& c = census();
  std::lock_guard lock(c.mu);
  if (c.state != State::on) return;
  for (auto& [base, w] : c.regions) {
    if (!w.gone && !look(c, base, w, trace::PagesAt::exit)) return;
  }
  c.regions.clear();
  c.state = State::done;
  g_census_on.store(false, std::memory_order_relaxed);
}

}  // namespace

void census_made(uintptr_t base, uint64_t bytes, int device) {
  // Small regions are left to CUPTI's records, as the turn watcher leaves them alone: their
  // migrations cost little, and the first one would pay for the check of the page table (2 MiB of
  // managed memory of the shim's own, made and moved inside the program's allocation).
  if (!trace::enabled() || bytes < kMinBytes || bytes > kMaxBytes || base % kPage != 0) return;
  ShimScope scope;
  Census& c = census();
  std::lock_guard lock(c.mu);
  if (c.state == State::unknown) {
    if (!cpu_pages_follow_managed(device < 0 ? 0 : device)) {
      c.state = State::off;
      trace::census("off", "the page table does not follow managed memory here (or cannot be read): "
                           "migrations are CUPTI's records only");
      return;
    }
    c.state = State::on;
    c.started_ns = trace::monotonic_ns();
    // Before the runtime's exit handlers (registered at its start, earlier) unmap managed memory.
    atexit(at_exit);
    pthread_atfork(nullptr, nullptr, fork_child);
    trace::census("on", nullptr);
  }
  if (c.state != State::on) return;
  c.regions.erase(base);  // a region freed without a hook seeing it: its address is reused
  c.regions.try_emplace(base, bytes / kPage);
  g_census_on.store(true, std::memory_order_relaxed);
}

void census_launch_slow() {
  ShimScope scope;
  Census& c = census();
  std::lock_guard lock(c.mu);
  if (c.state != State::on) return;
  for (auto& [base, w] : c.regions) {
    // Before its first launch, or after a synchronisation: what the CPU took since.
    if (!w.gone && w.epoch != c.epoch && !look(c, base, w, trace::PagesAt::launch)) return;
  }
}

void census_launched_slow() {
  ShimScope scope;
  Census& c = census();
  std::lock_guard lock(c.mu);
  if (c.state != State::on) return;
  // Every region, not only those the launch's arguments name: a kernel reaches managed memory
  // through pointers no scan sees, and under policy off nothing is scanned at all.
  for (auto& [base, w] : c.regions) w.gpu_used = true;
}

void census_synchronized_slow() {
  ShimScope scope;
  Census& c = census();
  std::lock_guard lock(c.mu);
  if (c.state != State::on) return;
  for (auto& [base, w] : c.regions) {
    if (!w.gone && w.gpu_used && !look(c, base, w, trace::PagesAt::sync)) return;
  }
  ++c.epoch;  // the CPU may touch any region from here on
}

void census_freeing(uintptr_t base) {
  if (!g_census_on.load(std::memory_order_relaxed)) return;
  ShimScope scope;
  Census& c = census();
  std::lock_guard lock(c.mu);
  auto it = c.regions.find(base);
  if (c.state != State::on || it == c.regions.end()) return;
  if (!it->second.gone && !look(c, base, it->second, trace::PagesAt::free)) return;
  c.regions.erase(it);
}

}  // namespace gms::act
