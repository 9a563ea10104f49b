#pragma once
// The report as numbers: what analyze() computes from a TraceSet and every renderer (text, JSON,
// HTML) prints. Nothing here formats anything.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/saturate.h"
#include "report/steps.h"
#include "report/trace.h"

namespace gms::report {

// What happened to unified memory inside something: the whole run, a region, a kernel, a range.
struct UmTally {
  uint64_t htod = 0, dtoh = 0, dtod = 0;  // migrated bytes by direction
  // Migrations that page faults caused (cause coherence or speculative): what a prefetch would
  // have moved in bulk instead. GPU faults pull pages to the device (htod), CPU faults back (dtoh).
  uint64_t fault_htod = 0, fault_dtoh = 0;
  int64_t fault_htod_ns = 0, fault_dtoh_ns = 0;  // their summed record durations
  int64_t gpu_faults = 0, cpu_faults = 0;        // GPU: CUPTI's counts (a record is a group); CPU: records
  int64_t thrashing = 0, throttling = 0, remote_maps = 0;  // records
  int64_t migration_ns = 0;                      // summed duration of all migration records
  // Migrations whose direction differs from the one before (to the host on CPU faults after to the
  // device, or back), records taken in time order: a region that ping-pongs between the CPU and the
  // GPU turns twice a round, however many records each burst takes. Moves to the host that no CPU
  // fault caused (evictions, prefetches) do not count; a CPU fault record is the CPU's turn too
  // (on the H200, CUDA 13.0, CPU faults came with no migration record to the host).
  int64_t turns = 0;
  uint8_t last_way = 0;  // of the latest migration added: 1 to the device, 2 to the host
  // The shim's page census (`pages` lines, act/census.h): bytes that left the CPU's page table and
  // came back, counted at launches, synchronisations, frees and exit; and the turns between the two
  // directions, look after look. Complete where CUPTI's records are not (they drop migrations on
  // fast GPU faults and have none for the CPU's reads).
  uint64_t page_to_gpu = 0, page_to_cpu = 0;
  int64_t page_turns = 0;
  uint8_t page_last_way = 0;

  uint64_t migrated() const { return sat_sum(sat_sum(htod, dtoh), dtod); }
  uint64_t page_moved() const { return sat_sum(page_to_gpu, page_to_cpu); }
  bool empty() const {
    return migrated() == 0 && page_moved() == 0 && gpu_faults == 0 && cpu_faults == 0 && thrashing == 0 && throttling == 0 &&
           remote_maps == 0;
  }
  void add(const UmEvent& e, const KnownIds& k);
  void add(const PagesEvent& e);
  void add(const UmTally& o);
};

struct CopyTally {
  int64_t count = 0;
  uint64_t bytes = 0;
  int64_t ns = 0;
  // Copies from or to pageable host memory that went through the driver's staging (not registered
  // by the shim): what pinning would speed up.
  int64_t pageable_count = 0;
  uint64_t pageable_bytes = 0;
  int64_t pageable_ns = 0;
};

// A row of the per-site table: a call site (from `site` lines), or an API when the trace has no sites.
struct SiteRow {
  std::string key;
  std::vector<SiteFrame> frames;  // one backtrace of the site, innermost first (site mode only)
  int64_t allocations = 0;
  uint64_t alloc_bytes = 0;
  UmTally um;
  CopyTally copies;
};

struct RegionRow {
  size_t file = 0;  // index into TraceSet::files (addresses are per process)
  uint64_t ptr = 0, bytes = 0;
  std::string site, api, kind, placement;
  int32_t device = -1;
  int64_t alloc_t = 0;
  int64_t free_t = -1;  // -1: still live at the end of the trace
  UmTally um;
  // Who moved it: migrations to the device during each kernel (by its name in the trace's
  // strings), and the CPU's fault records by faulting instruction (at most kMaxPcs of them).
  std::map<uint32_t, int64_t> gpu_kernels;
  std::map<uint64_t, int64_t> cpu_pcs;
  static constexpr size_t kMaxPcs = 16;
};

struct KernelRow {
  std::string name;  // as the trace has it (CUPTI's mangled name)
  int64_t launches = 0, time_ns = 0;
  int64_t fault_time_ns = 0;  // time of the launches during which pages migrated on GPU faults
  UmTally um;
  std::string demangled;  // demangle(name): what people read
};

struct RangeRow {
  std::string domain, name;
  int64_t count = 0, time_ns = 0;
  UmTally um;
  CopyTally copies;
};

// The host link, and the rates the hints promise.
struct LinkPeak {
  int64_t gen = 0, width = 0;
  bool assumed = false;        // no header gave the link: PCIe gen5 x16 assumed
  double theoretical_gbps = 0;  // per direction
  double practical_gbps = 0;    // pinned copies, as measured
  double prefetch_gbps = 0;     // bulk prefetch of managed memory, as measured
  std::string basis;            // one line: where the practical figure comes from
};

struct CopyKindRow {
  std::string kind;  // "htod pageable", "dtod", ...
  std::string dir, host_kind, path;
  int64_t count = 0;
  uint64_t bytes = 0;
  int64_t ns = 0;
  double gbps = 0;       // bytes / summed duration
  double peak_gbps = 0;  // the link's practical peak; 0 where the host link does not bound it
};

struct CopySummary {
  std::string source = "none";  // "memcpy" (CUPTI records: device time), "copy" (the shim's calls: host time)
  std::vector<CopyKindRow> kinds;
  CopyTally all;
  int64_t pinned_estimate_ns = 0;  // the pageable bytes at the practical peak
};

struct RegistrationSummary {
  int64_t registers = 0, failed = 0, unregisters = 0;
  uint64_t register_bytes = 0, unregister_bytes = 0;
  int64_t register_ns = 0, unregister_ns = 0;
  std::map<std::string, int64_t> register_why, unregister_why, failures;
  CacheTotals cache;  // summed over files
};

struct DecisionRow {
  std::string what, reason;  // reason empty in the per-what rows
  int64_t count = 0;
  uint64_t bytes = 0;
};

struct Offender {
  std::string kind;     // pageable_copies, fault_migration, cpu_fault_migration, thrashing, registration
  std::string subject;  // the site, API, kernel or region
  uint64_t bytes = 0;
  int64_t count = 0;
  double gbps = 0;         // what was achieved
  double better_gbps = 0;  // what the fix would reach
  int64_t lost_ns = 0;     // estimated time the fix would save
  std::string hint;        // one line
};

struct Totals {
  UmTally um;
  // The page census over the files: "on" where every file with managed memory had it on, else the
  // first other state ("off", "stopped") and why; "" where no file said.
  std::string census, census_why;
  std::map<std::string, uint64_t> migrated_by_cause;
  int64_t dropped_shim = 0, dropped_cupti = 0, dropped_other = 0, dropped_total = 0;
  int64_t kernels = 0, kernel_ns = 0;
  int64_t memsets = 0;
  uint64_t memset_bytes = 0;
  int64_t allocations = 0, frees = 0;
  uint64_t alloc_bytes = 0;
  int64_t unknown_keys = 0;
  std::map<std::string, int64_t> unknown_types;
};

struct Report {
  Totals totals;
  bool by_site = false;  // the site table is keyed by call site (else by API)
  std::vector<SiteRow> sites;
  std::vector<RegionRow> regions;  // regions with any unified-memory activity, busiest first
  int64_t regions_total = 0;       // every region the trace allocated
  UmTally unattributed;            // unified-memory records inside no region the trace allocated
  std::vector<KernelRow> kernels;
  std::vector<RangeRow> ranges;
  LinkPeak link;
  CopySummary copies;
  RegistrationSummary registration;
  std::vector<DecisionRow> decisions;         // per what
  std::vector<DecisionRow> decision_reasons;  // per what and reason
  std::vector<Offender> offenders;            // worst first, at most `top`
  std::vector<StepRow> steps;                 // per file: its repeating step and the bound
};

struct AnalyzeOptions {
  int top = 5;
  uint64_t budget = 0;  // the budget the steps' floor and schedule are for (0: each header's)
};

// Sorts each file's events by time (in place) and computes the report.
Report analyze(TraceSet& set, const AnalyzeOptions& options);

// Pieces of analyze(), in their own files.
LinkPeak find_link_peak(const TraceSet& set);
void summarize_copies(const TraceSet& set, Report& report);
void summarize_registration(const TraceSet& set, Report& report);
void summarize_decisions(const TraceSet& set, Report& report);
void find_offenders(const TraceSet& set, const Report& report, int top, std::vector<Offender>* out);

// "train_step" or "libfoo.so+0x1a2b": the first frame outside the shim and CUDA's own libraries.
std::string site_label(const std::vector<SiteFrame>& frames);

}  // namespace gms::report
