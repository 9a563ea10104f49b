// Explicit copies by kind against the host link's peak, host registration, placement decisions.
#include <algorithm>
#include <map>
#include <tuple>

#include "report/model.h"

namespace gms::report {
namespace {

// Measured on the project's H100 (PCIe gen5 x16, shared/SCENARIOS.md): pinned copies 54.9 GB/s
// host to device, 55.2 device to host; a bulk cudaMemPrefetchAsync of managed memory 46.3 GB/s.
constexpr double kH100PinnedGbps = 55.0;
constexpr double kH100PrefetchGbps = 46.3;
constexpr double kGen5x16TheoreticalGbps = 64.0;

double theoretical_gbps(int64_t gen, int64_t width) {
  // Per lane and direction, rounded: gen3 ~1 GB/s (x16 ~16), doubling each generation.
  double lane = 0;
  switch (gen) {
    case 1: lane = 0.25; break;
    case 2: lane = 0.5; break;
    default: lane = gen >= 3 ? static_cast<double>(int64_t{1} << std::min<int64_t>(gen - 3, 10)) : 0;
  }
  return lane * static_cast<double>(width);
}

}  // namespace

LinkPeak find_link_peak(const TraceSet& set) {
  LinkPeak link;
  for (const TraceFile& f : set.files) {
    for (const DeviceInfo& d : f.devices) {
      if (d.pcie_gen > 0 && d.pcie_width > 0 && link.gen == 0) {
        link.gen = d.pcie_gen;
        link.width = d.pcie_width;
      }
    }
  }
  if (link.gen == 0) {
    link.gen = 5;
    link.width = 16;
    link.assumed = true;
  }
  link.theoretical_gbps = theoretical_gbps(link.gen, link.width);
  if (link.gen == 5 && link.width == 16) {
    link.practical_gbps = kH100PinnedGbps;
    link.prefetch_gbps = kH100PrefetchGbps;
    link.basis = "55 GB/s pinned, measured on an H100 over PCIe gen5 x16";
  } else {
    // Other links: the same fraction of their theoretical rate as measured on gen5 x16.
    link.practical_gbps = link.theoretical_gbps * kH100PinnedGbps / kGen5x16TheoreticalGbps;
    link.prefetch_gbps = link.practical_gbps * kH100PrefetchGbps / kH100PinnedGbps;
    link.basis = "86% of the theoretical rate, the fraction measured with pinned copies on PCIe gen5 x16";
  }
  if (link.assumed) link.basis += " (no link in the trace's headers: PCIe gen5 x16 assumed)";
  return link;
}

void summarize_copies(const TraceSet& set, Report& r) {
  const KnownIds& k = set.ids;
  r.link = find_link_peak(set);
  bool any_memcpy = false, any_copy = false;
  for (const TraceFile& f : set.files) {
    any_memcpy = any_memcpy || !f.memcpys.empty();
    any_copy = any_copy || !f.copies.empty();
  }
  CopySummary& s = r.copies;
  // CUPTI's records time the copy on the device and say what memory it really read (a buffer
  // the shim registered shows as pinned); the shim's own events are the fallback.
  s.source = any_memcpy ? "memcpy" : any_copy ? "copy" : "none";
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, CopyKindRow> rows;  // (dir, host kind, path)
  auto add = [&](uint32_t dir, uint32_t host_kind, uint32_t path, uint64_t bytes, int64_t ns) {
    CopyKindRow& row = rows[{dir, host_kind, path}];
    if (row.count == 0) {
      row.dir = set.strings.str(dir);
      row.host_kind = set.strings.str(host_kind);
      row.path = set.strings.str(path);
      row.kind = row.dir.empty() ? "unknown" : row.dir;
      if (!row.host_kind.empty()) row.kind += " " + row.host_kind;
      if (!row.path.empty() && path != k.driver) row.kind += " (" + row.path + ")";
      if (dir == k.htod || dir == k.dtoh) row.peak_gbps = r.link.practical_gbps;
    }
    ++row.count;
    add_to(row.bytes, bytes);
    add_to(row.ns, ns);
    ++s.all.count;
    add_to(s.all.bytes, bytes);
    add_to(s.all.ns, ns);
    bool pageable = host_kind == k.pageable && (path == 0 || path == k.driver) && (dir == k.htod || dir == k.dtoh);
    if (pageable) {
      ++s.all.pageable_count;
      add_to(s.all.pageable_bytes, bytes);
      add_to(s.all.pageable_ns, ns);
    }
  };
  for (const TraceFile& f : set.files) {
    if (s.source == "memcpy") {
      for (const MemcpyEvent& e : f.memcpys) {
        uint32_t host = e.copy_kind == k.dtoh ? e.dst_kind : e.copy_kind == k.dtod || e.copy_kind == k.peer ? 0 : e.src_kind;
        add(e.copy_kind, host, 0, e.bytes, e.end - e.t);
      }
    } else {
      for (const CopyEvent& e : f.copies) add(e.dir, e.host_kind, e.path, e.bytes, e.dur);
    }
  }
  for (auto& [key, row] : rows) {
    row.gbps = row.ns > 0 ? static_cast<double>(row.bytes) / static_cast<double>(row.ns) : 0;
    s.kinds.push_back(std::move(row));
  }
  std::stable_sort(s.kinds.begin(), s.kinds.end(), [](const CopyKindRow& a, const CopyKindRow& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.kind < b.kind;
  });
  s.pinned_estimate_ns = static_cast<int64_t>(static_cast<double>(s.all.pageable_bytes) / r.link.practical_gbps);
}

void summarize_registration(const TraceSet& set, Report& r) {
  const KnownIds& k = set.ids;
  RegistrationSummary& s = r.registration;
  for (const TraceFile& f : set.files) {
    for (const RegisterEvent& e : f.registrations) {
      const std::string& why = set.strings.str(e.why);
      if (e.unregister) {
        ++s.unregisters;
        add_to(s.unregister_bytes, e.bytes);
        add_to(s.unregister_ns, e.dur);
        ++s.unregister_why[why.empty() ? "unknown" : why];
        continue;
      }
      ++s.registers;
      add_to(s.register_bytes, e.bytes);
      add_to(s.register_ns, e.dur);
      ++s.register_why[why.empty() ? "unknown" : why];
      if (e.result != k.ok && e.result != 0) {
        ++s.failed;
        ++s.failures[set.strings.str(e.result)];
      }
    }
    if (f.cache.seen) {
      s.cache.seen = true;
      add_to(s.cache.hits, f.cache.hits);
      add_to(s.cache.misses, f.cache.misses);
      add_to(s.cache.evictions, f.cache.evictions);
      add_to(s.cache.invalidations, f.cache.invalidations);
      add_to(s.cache.bytes, f.cache.bytes);
    }
  }
}

void summarize_decisions(const TraceSet& set, Report& r) {
  std::map<std::string, DecisionRow> by_what;
  std::map<std::pair<std::string, std::string>, DecisionRow> by_reason;
  for (const TraceFile& f : set.files) {
    for (const DecisionEvent& e : f.decisions) {
      std::string what = set.strings.str(e.what);
      if (what.empty()) what = "unknown";
      DecisionRow& w = by_what[what];
      w.what = what;
      ++w.count;
      add_to(w.bytes, e.bytes);
      const std::string& reason = set.strings.str(e.reason);
      DecisionRow& wr = by_reason[{what, reason}];
      wr.what = what;
      wr.reason = reason;
      ++wr.count;
      add_to(wr.bytes, e.bytes);
    }
  }
  auto order = [](const DecisionRow& a, const DecisionRow& b) {
    return a.count != b.count ? a.count > b.count : std::tie(a.what, a.reason) < std::tie(b.what, b.reason);
  };
  for (auto& [key, row] : by_what) r.decisions.push_back(row);
  for (auto& [key, row] : by_reason) r.decision_reasons.push_back(row);
  std::stable_sort(r.decisions.begin(), r.decisions.end(), order);
  std::stable_sort(r.decision_reasons.begin(), r.decision_reasons.end(), order);
}

}  // namespace gms::report
