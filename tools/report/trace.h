#pragma once
// What the reader keeps of a trace: one compact struct per event, strings interned once (kernel
// names, APIs and enum-like values repeat millions of times). Every time is in nanoseconds on the
// merged timeline of all files (see align.h), so events of several ranks compare directly.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gms::report {

// Interned strings. Id 0 is the empty string, which also stands for "absent".
class Strings {
 public:
  Strings() { intern(""); }
  uint32_t intern(std::string_view s);
  const std::string& str(uint32_t id) const { return list_[id]; }

 private:
  // Transparent hashing: looking a string_view up allocates nothing (kernel names are long).
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> list_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;
};

// One device as the header describes it.
struct DeviceInfo {
  int64_t index = 0;
  std::string name;
  int64_t total_bytes = 0;
  int64_t budget_bytes = 0;
  int64_t pcie_gen = 0;  // 0: not in the trace
  int64_t pcie_width = 0;
};

struct AllocEvent {
  int64_t t;
  uint64_t ptr, bytes;
  uint32_t api, kind, placement, site;  // site: the id as text (site ids are per file)
  int32_t device;
};
struct FreeEvent {
  int64_t t;
  uint64_t ptr, bytes;
  uint32_t api;
};
struct CopyEvent {  // a copy call the program made, timed on the host by the shim
  int64_t t, dur;
  uint64_t bytes;
  uint32_t api, dir, host_kind, path, site;
};
struct DecisionEvent {
  int64_t t;
  uint64_t ptr, bytes;
  uint32_t what, reason;
  int32_t device;
};
struct BudgetEvent {
  int64_t t;
  int64_t limit, used, resident;
  int32_t device;
};
struct RegisterEvent {  // register and unregister
  int64_t t, dur;
  uint64_t ptr, bytes;
  uint32_t result, why;  // result: empty for unregister, "ok" or an error name for register
  bool unregister;
};
struct KernelEvent {
  int64_t t, end;
  uint32_t name;
  int32_t device;
  int64_t stream, correlation;
  int32_t grid[3], block[3];
};
struct MemcpyEvent {  // a copy as the device executed it (CUPTI)
  int64_t t, end;
  uint64_t bytes;
  uint32_t copy_kind, src_kind, dst_kind;
  int32_t device;
  int64_t stream;
};
struct MemsetEvent {
  int64_t t, end;
  uint64_t bytes;
  int32_t device;
  int64_t stream;
};
struct UmEvent {  // a unified memory counter record (CUPTI)
  int64_t t, end;
  uint64_t address, bytes;
  int64_t value;
  uint32_t counter, cause, access;
  int32_t device;
};
struct PagesEvent {  // the shim's page census of a managed region (`pages` lines): bytes since its last look
  int64_t t;
  uint64_t ptr, to_gpu, to_cpu, cpu;
  uint32_t at;
};
struct RangeEvent {  // an NVTX range
  int64_t t, end;
  uint32_t name, domain;
  int64_t tid;
};
struct LaunchEvent {  // a kernel launch the program queued (the shim's `launch` lines, parts merged)
  int64_t t;
  uint64_t seq, stream, fn;
  uint32_t first_region, regions;  // into TraceFile::launch_regions
};
struct CacheTotals {  // the registration cache, as its last `cache` line said
  int64_t hits = 0, misses = 0, evictions = 0, invalidations = 0, bytes = 0;
  bool seen = false;
};
struct SiteFrame {
  std::string module, offset, symbol;
};

// One trace file: its header and its events.
struct TraceFile {
  std::string path;
  // Unified-memory records left out for values no driver can make (trace_reader.cc), and the first.
  int64_t um_impossible = 0;
  std::string um_impossible_example;
  // Header.
  int64_t version = 0;
  std::string host;
  int64_t pid = 0;
  int64_t rank = -1, local_rank = -1;  // -1: RANK / LOCAL_RANK were not set
  std::vector<std::string> argv;
  int64_t t0_ns = 0;
  std::string wall_t0;
  int64_t driver_version = 0, cuda_version = 0;
  std::string policy, cupti;
  bool faults = false;
  std::vector<DeviceInfo> devices;
  // Where this file's zero lies on the merged timeline (align.h).
  int64_t offset_ns = 0;
  // Bookkeeping.
  int64_t lines = 0;
  bool ended = false;  // the `end` line was there
  int64_t end_events = 0, end_dropped = 0;
  int64_t dropped_shim = 0, dropped_cupti = 0, dropped_other = 0;
  std::map<std::string, int64_t> unknown_types;  // type -> lines
  int64_t unknown_keys = 0;
  CacheTotals cache;
  std::unordered_map<uint32_t, std::vector<SiteFrame>> sites;  // site id (interned text) -> frames
  // Events, in file order until the analysis sorts them.
  std::vector<AllocEvent> allocs;
  std::vector<FreeEvent> frees;
  std::vector<CopyEvent> copies;
  std::vector<DecisionEvent> decisions;
  std::vector<BudgetEvent> budgets;
  std::vector<RegisterEvent> registrations;
  std::vector<KernelEvent> kernels;
  std::vector<MemcpyEvent> memcpys;
  std::vector<MemsetEvent> memsets;
  std::vector<UmEvent> um;
  std::vector<PagesEvent> pages;
  uint32_t census_state = 0, census_why = 0;  // the last `census` line's (interned; 0: none)
  std::vector<RangeEvent> ranges;
  std::vector<LaunchEvent> launches;
  std::vector<uint64_t> launch_regions;  // the allocations each launch points into, launch after launch

  // "rank 1" when the rank is known, else "pid 4242"; used wherever a row names its process.
  std::string who() const;
};

// Well-known values, interned once so that the analysis compares ids rather than strings.
struct KnownIds {
  explicit KnownIds(Strings& s);
  uint32_t htod, dtoh, dtod, peer, htoh;
  uint32_t pageable, pinned, managed, device;
  uint32_t driver;
  uint32_t gpu_fault, cpu_fault, thrashing, throttling, remote_map;
  uint32_t coherence, speculative, user_prefetch, eviction;
  uint32_t ok;
  uint32_t vmm, pinned_host;
};

struct TraceSet {
  Strings strings;
  KnownIds ids{strings};
  std::vector<TraceFile> files;
  std::vector<std::string> warnings;  // said on stderr and kept in the report
  int64_t span_ns = 0;                // the merged timeline runs from 0 to span_ns
};

}  // namespace gms::report
