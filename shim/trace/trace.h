#pragma once
// The trace collector (GPUMEMSHIM_TRACE): what the hooks call. Format: shim/trace/FORMAT.md.
//
// Cost when tracing is off: enabled() is one relaxed atomic load, and every call site tests it
// first. When it is on, an event is one clock read and one write into a bounded lock-free ring of
// fixed-size records; a background thread (started with every signal blocked) turns records into
// JSON lines and write()s them. A full ring drops records and counts them: a hook never waits for
// I/O and never allocates (except once, for the first event of the process: see start in
// collector.cc). This part knows nothing of CUDA; shim/trace/cuda_backend.cc adds CUPTI and the
// devices of the header through the Backend below.
#include <atomic>
#include <cstdint>

#include "core/guard.h"
#include "core/options.h"
#include "core/registry.h"
#include "core/stats.h"

namespace gms::trace {

class Out;

extern std::atomic<bool> g_on;
// True while events are recorded: GPUMEMSHIM_TRACE is set and tracing has not stopped.
inline bool enabled() { return g_on.load(std::memory_order_relaxed); }

// The trace clock: CLOCK_MONOTONIC in nanoseconds, and the same counted from the header's t0_ns.
uint64_t monotonic_ns();
int64_t now();
uint64_t t0_ns();

// Starts the trace now if no event has started it yet. Before managed memory is made: CUPTI
// records unified-memory activity (migrations, faults) only for managed memory made after its
// counters are on, so a trace started by the allocation's own event saw none of that allocation's
// migrations (found on the H200, 2026-11-26: a single cudaMallocManaged gave no record at all).
void begin();
// Starts CUPTI now, if the process is to be traced and it is not on yet; the trace file still
// starts at the first event (a process that only initialises the driver, a launcher asking
// whether there is a GPU, writes no file). At the program's cuInit: before a framework sets up a
// copy of CUPTI of its own, which would keep CUPTI's one subscriber (tools/report/README.md).
void start_device_records();
// Hands CUPTI's records so far to the trace. Before managed memory is freed: CUPTI with no shim
// reported the migrations of the CPU's faults on memory never freed, and the shim's trace of the
// same program, which frees it, had none of them (H200, 2026-11-26).
void flush_device_records();

// ---- the shim's own events: call only when enabled() ----

// A region was created (any driver allocation the registry records) or went away.
void alloc(const Region& r);
void free(Family f, const Region& r);
// One copy of `bytes` in one direction; `api` and the start time come from the CopyScope of the
// hook on this thread (a batch call gives one event per copy, each with the call's duration).
void copy(Direction dir, HostKind host, uint64_t bytes);
// `what` and `reason` must be string literals (or otherwise live as long as the process).
void decision(const char* what, uintptr_t ptr, uint64_t bytes, int device, const char* reason);
// The device's budget changed: a `budget` line now, or within the writer's next round when the
// device had one less than a millisecond ago (the line then carries the values of that moment).
void budget(int device);
// The shim's host registrations (pinning for copies). `result` and `why`: string literals.
void host_registered(uintptr_t ptr, uint64_t bytes, uint64_t dur_ns, const char* result, const char* why);
void host_unregistered(uintptr_t ptr, uint64_t bytes, uint64_t dur_ns, const char* why);
void cache_totals(uint64_t hits, uint64_t misses, uint64_t evictions, uint64_t invalidations, uint64_t bytes);
// A kernel launch, just queued: its number among the process's launches since the trace started,
// and the tracked allocations (registry region bases) its arguments point into. Every launch while
// tracing has one, in the order of CUPTI's `kernel` records on its stream: the step timelines of
// docs/design/schedule.md.
void launch(uint64_t seq, uintptr_t stream, uintptr_t fn, const uintptr_t* regions, size_t n);
// The page census of managed memory (act/census.h): pages of the region at `base` that went to the
// GPU and came back to the CPU since its last look, and what the CPU holds now, in bytes.
enum class PagesAt : uint8_t { launch, sync, free, exit };
void pages(uintptr_t base, uint64_t to_gpu, uint64_t to_cpu, uint64_t cpu, PagesAt at);
// The census's state (`on`, `off`, `stopped`) and why: string literals.
void census(const char* state, const char* why);

// Copy paths of the `copy` event (FORMAT.md): what act/ made of a copy.
enum class CopyPath : uint8_t { driver, registered, staged, host };

// The copy hooks open one of these before the real call: it notes the hook's name and the start
// time on this thread, for the copy events that the call records. Costs one relaxed load when off.
struct CopyCall {
  const char* api;
  int64_t t0;
  CopyPath path;
};
extern thread_local CopyCall t_copy __attribute__((tls_model("initial-exec")));

class CopyScope {
 public:
  GMS_TLS_ACCESS explicit CopyScope(const char* api) {
    if (__builtin_expect(enabled(), 0)) {
      api_ = api;
      t_copy = CopyCall{api, now(), CopyPath::driver};
    }
  }
  GMS_TLS_ACCESS ~CopyScope() {
    if (api_) t_copy.api = nullptr;
  }
  CopyScope(const CopyScope&) = delete;
  CopyScope& operator=(const CopyScope&) = delete;

 private:
  const char* api_ = nullptr;
};
// act/ says how it carried out the copy of the current CopyScope (registered, staged).
GMS_TLS_ACCESS inline void copy_path(CopyPath p) { t_copy.path = p; }

// ---- life cycle ----

// What the shim with CUDA adds (shim/trace/cuda_backend.cc). Everything runs outside the hooks'
// fast path, under the shim's guard.
struct Backend {
  // Starts CUPTI when the trace starts (the first event); returns "ok" or why not (a string that
  // lives as long as the process). May append keys to the header through header_extra.
  const char* (*start_cupti)(bool faults);
  // Appends the header's driver and device keys (`,"driver_version":...,"devices":[...]`).
  void (*describe)(Out& out);
  // Optional header keys about CUPTI (`,"cupti_missing":[...]`); may be null.
  void (*header_extra)(Out& out);
  // Hands CUPTI's finished records to the collector; `force`: incomplete buffers too.
  void (*flush_cupti)(bool force);
  // In a fork child, before anything else of the trace: CUPTI is the parent's.
  void (*forked_child)();
};
void set_backend(const Backend* backend);

// From the library constructor, after runtime_init: reads GPUMEMSHIM_TRACE*, sets t0. Registers the fork handlers once (after the
// runtime's, so the trace's prepare handler runs first: it may wait for CUPTI's threads, which
// must still be able to allocate).
void configure(const Options& o);
// True when GPUMEMSHIM_TRACE is set (even before the first event).
bool configured();
// The library destructor, before the statistics: writes what is left and the `end` line.
void finish();
// gpumemshim_trace_flush(): CUPTI's records and the ring to the file now. False when not tracing.
bool flush();

// For the CUDA backend: push a record made outside the hooks (CUPTI's threads). When the ring is
// full it is drained on this thread first, so CUPTI's records are lost only if the file is.
struct Record;
void push_from_backend(const Record& r);
// Records CUPTI says it dropped.
void cupti_dropped(uint64_t n);

}  // namespace gms::trace
