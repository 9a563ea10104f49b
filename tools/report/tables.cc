#include "report/demangle.h"
#include "report/tables.h"

#include <cstdio>
#include <set>

#include "report/units.h"

namespace gms::report {
namespace {

std::string count(int64_t n) { return human_count(n); }
std::string bytes(uint64_t n) { return human_bytes(n); }
std::string ratio(double r) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", r);
  return text;
}

void limit_rows(Table& t, size_t total, size_t max_rows, const char* what) {
  if (total > max_rows) {
    t.rows.resize(max_rows);
    t.notes.push_back(human_count(static_cast<int64_t>(total - max_rows)) + " more " + what +
                      " not shown (--json has them all)");
  }
}

std::vector<std::string> summary_lines(const TraceSet& set) {
  std::set<std::string> hosts;
  for (const TraceFile& f : set.files) hosts.insert(f.host);
  std::vector<std::string> out;
  out.push_back("Read " + count(static_cast<int64_t>(set.files.size())) +
                (set.files.size() == 1 ? " trace" : " traces") + " (" + count(static_cast<int64_t>(set.files.size())) +
                (set.files.size() == 1 ? " process" : " processes") + " on " + count(static_cast<int64_t>(hosts.size())) +
                (hosts.size() == 1 ? " host" : " hosts") + "), " + human_duration(set.span_ns) + " of run time.");
  for (const TraceFile& f : set.files) {
    std::string line = "  " + f.path + ": ";
    if (f.rank >= 0) line += "rank " + std::to_string(f.rank) + ", ";
    line += "pid " + std::to_string(f.pid) + " on " + (f.host.empty() ? "?" : f.host);
    if (!f.policy.empty()) line += ", policy " + f.policy;
    line += ", CUPTI " + (f.cupti.empty() ? std::string("?") : f.cupti);
    line += f.faults ? ", faults traced" : ", faults not traced";
    line += ", " + count(f.lines) + " lines";
    if (!f.ended) line += ", TRUNCATED";
    out.push_back(line);
    for (const DeviceInfo& d : f.devices) {
      std::string dev = "    GPU " + std::to_string(d.index) + ": " + (d.name.empty() ? "?" : d.name);
      if (d.pcie_gen > 0) dev += ", PCIe gen" + std::to_string(d.pcie_gen) + " x" + std::to_string(d.pcie_width);
      if (d.total_bytes > 0) dev += ", " + bytes(static_cast<uint64_t>(d.total_bytes));
      if (d.budget_bytes > 0) dev += ", budget " + bytes(static_cast<uint64_t>(d.budget_bytes));
      out.push_back(dev);
    }
  }
  return out;
}

Table totals_table(const Report& r) {
  const Totals& t = r.totals;
  Table tab{"totals", "Totals", {"what", "amount", ""}, {false, true, false}, {}, {}, ""};
  auto row = [&](std::string what, std::string value, std::string detail = "") {
    tab.rows.push_back({std::move(what), std::move(value), std::move(detail)});
  };
  // CUPTI loses records of migrations on GPU faults when they come fast, and says it dropped none
  // (measured with CUPTI alone: tools/report/README.md): such a figure is a floor, and GPU faults
  // none were recorded for are unknown, not zero.
  row("migrated host to device", bytes(t.um.htod),
      t.um.fault_htod > 0 ? "at least: " + bytes(t.um.fault_htod) + " on GPU faults, which CUPTI may undercount" : "");
  // CPU faults with no migration record at all (CUPTI recorded none for pages the CPU read back,
  // where it did for pages written): the bytes are unknown, not zero.
  if (t.um.dtoh == 0 && t.um.cpu_faults > 0) {
    row("migrated device to host", "unknown", "no record for " + counted(t.um.cpu_faults, "CPU fault", "CPU faults"));
  } else {
    row("migrated device to host", bytes(t.um.dtoh));
  }
  row("migrated device to device", bytes(t.um.dtod));
  for (const auto& [cause, n] : t.migrated_by_cause) row("  by cause: " + cause, bytes(n));
  // The shim's page census counts what CUPTI's records miss (policy/page_census.h): where it ran,
  // its figures are the ones to read for the program's own managed memory.
  if (t.census == "on" || t.census == "stopped" || t.um.page_moved() > 0) {
    const std::string floor =
        t.census == "stopped" ? "at least (the census stopped: " + t.census_why + ")"
        : t.census == "off"   ? "at least (the census was off in a process: " + t.census_why + ")"
                              : "the page table, looked at launches, synchronisations and frees";
    row("to the GPU, page table", bytes(t.um.page_to_gpu), floor);
    row("back to the CPU, page table", bytes(t.um.page_to_cpu), floor);
  } else if (t.census == "off") {
    row("page table census", "off", t.census_why);
  }
  if (t.um.gpu_faults == 0 && t.um.fault_htod > 0) {
    row("GPU page faults", "unknown", "none recorded for " + bytes(t.um.fault_htod) +
                                          " moved on them (not traced, or lost by CUPTI under load)");
  } else {
    row("GPU page faults", count(t.um.gpu_faults));
  }
  row("CPU page faults", count(t.um.cpu_faults));
  row("thrashing", count(t.um.thrashing));
  row("throttling", count(t.um.throttling));
  row("remote maps", count(t.um.remote_maps));
  row("kernel launches", count(t.kernels), human_duration(t.kernel_ns));
  row("explicit copies", count(r.copies.all.count), bytes(r.copies.all.bytes));
  row("allocations", count(t.allocations), bytes(t.alloc_bytes) + ", " + counted(t.frees, "free", "frees"));
  row("dropped records", count(t.dropped_total),
      "shim " + count(t.dropped_shim) + ", CUPTI " + count(t.dropped_cupti));
  int64_t unknown_lines = 0;
  std::string types;
  for (const auto& [type, n] : t.unknown_types) {
    unknown_lines += n;
    types += (types.empty() ? "" : ", ") + type;
  }
  row("lines of unknown types", count(unknown_lines), types.empty() ? "" : "ignored: " + types);
  row("unknown keys", count(t.unknown_keys), t.unknown_keys ? "ignored" : "");
  return tab;
}

Table sites_table(const Report& r, size_t max_rows) {
  Table tab{"sites",
            r.by_site ? "Per allocation site" : "Per API (the trace has no call sites)",
            {r.by_site ? "site" : "API", "allocs", "allocated", "GPU faults", "CPU faults", "migrated", "thrashing",
             "UM time", "copies", "copied", "pageable"},
            {false, true, true, true, true, true, true, true, true, true, true},
            {},
            {},
            "no allocations or copies in the trace"};
  for (const SiteRow& s : r.sites) {
    tab.rows.push_back({ellipsize(s.key, 48), count(s.allocations), bytes(s.alloc_bytes), count(s.um.gpu_faults),
                        count(s.um.cpu_faults), bytes(s.um.migrated()), count(s.um.thrashing),
                        human_duration(s.um.migration_ns), count(s.copies.count), bytes(s.copies.bytes),
                        bytes(s.copies.pageable_bytes)});
  }
  limit_rows(tab, r.sites.size(), max_rows, "rows");
  return tab;
}

Table regions_table(const TraceSet& set, const Report& r, size_t max_rows) {
  bool many = set.files.size() > 1;
  Table tab{"regions", "Per region (unified-memory activity)", {}, {}, {}, {}, "no unified-memory records in the trace"};
  tab.headers = {"region", "size", "kind", "site", "GPU faults", "CPU faults", "migrated", "thrashing", "UM time"};
  tab.numeric = {false, true, false, false, true, true, true, true, true};
  if (many) {
    tab.headers.insert(tab.headers.begin() + 1, "process");
    tab.numeric.insert(tab.numeric.begin() + 1, false);
  }
  for (const RegionRow& g : r.regions) {
    std::vector<std::string> row = {hex_address(g.ptr), bytes(g.bytes), g.kind, ellipsize(g.site, 32),
                                    count(g.um.gpu_faults), count(g.um.cpu_faults), bytes(g.um.migrated()),
                                    count(g.um.thrashing), human_duration(g.um.migration_ns)};
    if (many) row.insert(row.begin() + 1, set.files[g.file].who());
    tab.rows.push_back(std::move(row));
  }
  limit_rows(tab, r.regions.size(), max_rows, "regions");
  if (!r.unattributed.empty()) {
    tab.notes.push_back("outside every region the trace allocated: " + bytes(r.unattributed.migrated()) + " migrated, " +
                        count(r.unattributed.gpu_faults) + " GPU faults, " + count(r.unattributed.cpu_faults) +
                        " CPU faults (allocated before tracing began, or by the driver)");
  }
  return tab;
}

Table kernels_table(const Report& r, size_t max_rows) {
  Table tab{"kernels",
            "Per kernel",
            {"kernel", "launches", "time", "average", "GPU faults", "migrated", "on faults", "fault rate", "thrashing"},
            {false, true, true, true, true, true, true, true, true},
            {},
            {},
            "no kernel records in the trace (CUPTI off?)"};
  for (const KernelRow& k : r.kernels) {
    tab.rows.push_back({short_name(k.demangled, 48), count(k.launches), human_duration(k.time_ns),
                        human_duration(k.launches ? k.time_ns / k.launches : 0), count(k.um.gpu_faults),
                        bytes(k.um.migrated()), bytes(k.um.fault_htod),
                        k.um.fault_htod ? human_rate(k.um.fault_htod, k.fault_time_ns) : "-", count(k.um.thrashing)});
  }
  limit_rows(tab, r.kernels.size(), max_rows, "kernels");
  if (!r.kernels.empty())
    tab.notes.push_back("unified-memory records count for every kernel running on their device at their time");
  return tab;
}

Table ranges_table(const Report& r, size_t max_rows) {
  Table tab{"ranges",
            "Per NVTX range",
            {"range", "count", "time", "migrated", "GPU faults", "CPU faults", "copies", "copied"},
            {false, true, true, true, true, true, true, true},
            {},
            {},
            "no NVTX ranges in the trace"};
  for (const RangeRow& g : r.ranges) {
    std::string name = g.domain.empty() ? g.name : g.domain + ": " + g.name;
    tab.rows.push_back({ellipsize(name, 48), count(g.count), human_duration(g.time_ns), bytes(g.um.migrated()),
                        count(g.um.gpu_faults), count(g.um.cpu_faults), count(g.copies.count), bytes(g.copies.bytes)});
  }
  limit_rows(tab, r.ranges.size(), max_rows, "ranges");
  if (!r.ranges.empty()) tab.notes.push_back("nested ranges each count what happened inside them");
  return tab;
}

Table copies_table(const Report& r) {
  const CopySummary& c = r.copies;
  Table tab{"copies",
            std::string("Explicit copies by kind") +
                (c.source == "memcpy" ? " (CUPTI records, device time)" : " (the shim's copy calls, host time)"),
            {"kind", "count", "bytes", "time", "bandwidth", "peak", "of peak"},
            {false, true, true, true, true, true, true},
            {},
            {},
            "no explicit copies in the trace"};
  for (const CopyKindRow& k : c.kinds) {
    tab.rows.push_back({k.kind, count(k.count), bytes(k.bytes), human_duration(k.ns), human_rate(k.bytes, k.ns),
                        k.peak_gbps > 0 ? human_gbps(k.peak_gbps) : "-",
                        k.peak_gbps > 0 && k.ns > 0 ? percent(k.gbps / k.peak_gbps) : "-"});
  }
  const LinkPeak& l = r.link;
  char link[256];
  std::snprintf(link, sizeof link, "link: PCIe gen%lld x%lld, %.0f GB/s theoretical per direction; peak %s",
                static_cast<long long>(l.gen), static_cast<long long>(l.width), l.theoretical_gbps, l.basis.c_str());
  tab.notes.push_back(link);
  if (c.all.pageable_bytes > 0) {
    tab.notes.push_back("pageable: " + bytes(c.all.pageable_bytes) + " in " + count(c.all.pageable_count) +
                        " copies took " + human_duration(c.all.pageable_ns) + "; pinned, about " +
                        human_duration(c.pinned_estimate_ns) + " at " + human_gbps(l.practical_gbps));
  }
  return tab;
}

Table registration_table(const Report& r) {
  const RegistrationSummary& s = r.registration;
  Table tab{"registration",
            "Host registration (the shim pinning pageable buffers)",
            {"", "count", "bytes", "time", "average", "why"},
            {false, true, true, true, true, false},
            {},
            {},
            "no registrations in the trace"};
  auto whys = [](const std::map<std::string, int64_t>& m) {
    std::string out;
    for (const auto& [why, n] : m) out += (out.empty() ? "" : ", ") + why + " " + human_count(n);
    return out;
  };
  if (s.registers > 0)
    tab.rows.push_back({"register", count(s.registers), bytes(s.register_bytes), human_duration(s.register_ns),
                        human_duration(s.register_ns / s.registers), whys(s.register_why)});
  if (s.unregisters > 0)
    tab.rows.push_back({"unregister", count(s.unregisters), bytes(s.unregister_bytes), human_duration(s.unregister_ns),
                        human_duration(s.unregister_ns / s.unregisters), whys(s.unregister_why)});
  if (s.failed > 0) tab.notes.push_back("failed registrations: " + whys(s.failures));
  if (s.cache.seen) {
    tab.notes.push_back("cache: " + count(s.cache.hits) + " hits, " + count(s.cache.misses) + " misses, " +
                        count(s.cache.evictions) + " evictions, " + count(s.cache.invalidations) + " invalidations, " +
                        bytes(static_cast<uint64_t>(s.cache.bytes)) + " registered");
  }
  return tab;
}

Table decisions_table(const Report& r) {
  Table tab{"decisions",
            "Placement decisions",
            {"decision", "reason", "count", "bytes"},
            {false, false, true, true},
            {},
            {},
            "no placement decisions in the trace"};
  for (const DecisionRow& d : r.decision_reasons) {
    tab.rows.push_back({d.what, d.reason.empty() ? "-" : d.reason, count(d.count), bytes(d.bytes)});
  }
  std::string totals;
  for (const DecisionRow& d : r.decisions) totals += (totals.empty() ? "" : ", ") + d.what + " " + count(d.count);
  if (!totals.empty()) tab.notes.push_back("in all: " + totals);
  return tab;
}

// Each process's repeating step against the least time its budget allows (report/steps.h).
Table steps_table(const TraceSet& set, const Report& r) {
  Table tab{"steps",
            "Repeating step",
            {"process", "kernels", "steps", "step", "floor", "/floor", "schedule", "/schedule", "busy", "idle",
             "copied in", "copied out", "peak", "budget"},
            {false, true, true, true, true, true, true, true, true, true, true, true, true, true},
            {},
            {},
            "no repeating step in the trace"};
  auto over = [](int64_t a, int64_t b) { return b > 0 ? ratio(static_cast<double>(a) / static_cast<double>(b)) : "-"; };
  for (const StepRow& s : r.steps) {
    const std::string who = set.files[s.file].who();
    if (!s.missing.empty()) {
      tab.notes.push_back(who + ": no step: " + s.missing);
      continue;
    }
    const bool bounded = s.bound_ns > 0;
    tab.rows.push_back({who, count(static_cast<int64_t>(s.period)), count(static_cast<int64_t>(s.steps)),
                        human_duration(s.measured_ns), bounded ? human_duration(s.floor_ns) : "-",
                        over(s.measured_ns, s.floor_ns), bounded ? human_duration(s.bound_ns) : "-",
                        over(s.measured_ns, s.bound_ns), human_duration(s.busy_ns), human_duration(s.idle_ns),
                        bytes(s.copied_in), bytes(s.copied_out), bytes(s.peak_bytes), s.budget ? bytes(s.budget) : "-"});
    if (s.idle_ns > 0) {
      tab.notes.push_back(who + ": idle " + human_duration(s.idle_ns) + ": " + human_duration(s.idle_copying_ns) +
                          " with copies running and no kernel (copies not overlapped), " +
                          human_duration(s.idle_ns - s.idle_copying_ns) +
                          " with nothing on the GPU (the host's waits: remaps, synchronisations, launches)");
    }
    if (s.copy_in_ns > 0 && s.copy_out_ns > 0) {
      tab.notes.push_back(who + ": copies in ran " + human_duration(s.copy_in_ns) + ", copies out " +
                          human_duration(s.copy_out_ns) + ", both at once " + human_duration(s.copy_both_ns) +
                          " (the link carries both directions at full rate: the less at once, the more they took turns)");
    }
    if (bounded && s.floor_at >= 0) {
      tab.notes.push_back(who + ": the floor binds at kernel " + count(s.floor_at) + " of the step (" + short_name(demangle(s.floor_kernel), 48) +
                          "), " + bytes(s.floor_away) + " away there: at least " + human_duration(s.floor_out_ns) +
                          " before it for the kernels and copies out, " + human_duration(s.floor_in_ns) +
                          " after it for the copies in and kernels");
    }
    if (bounded) {
      tab.notes.push_back(who + ": the schedule moves " + bytes(s.plan_in) + " in and " + bytes(s.plan_out) +
                          " out per step at 54.6 GB/s each way beside the kernels, each at its fastest in the trace (" +
                          human_duration(s.kernel_ns) + " in all)" +
                          (s.feasible ? "" : "; a kernel alone needs more than the budget"));
      if (s.plan_dropped > 0) {
        tab.notes.push_back(who + ": of which it drops " + bytes(s.plan_dropped) +
                            " a step with no copy (freed before their next use); copying them out, as the shim must "
                            "(nothing tells it the program will not read them): floor " +
                            human_duration(s.floor_copied_ns) + " (" + over(s.measured_ns, s.floor_copied_ns) +
                            "), schedule " + human_duration(s.bound_copied_ns) + " (" +
                            over(s.measured_ns, s.bound_copied_ns) + "), " + bytes(s.plan_copied_out) + " out");
      }
    }
  }
  if (!tab.rows.empty()) {
    tab.notes.push_back("step: the last whole step but one, as it ran (busy: kernels running; idle: the GPU waiting); "
                        "floor: no schedule beats it; schedule: a planner that knows the step (policy/step_plan.h)");
  }
  return tab;
}

}  // namespace

ReportView build_view(const TraceSet& set, const Report& r, size_t max_rows) {
  ReportView v;
  v.summary = summary_lines(set);
  v.warnings = set.warnings;
  if (r.totals.dropped_total > 0) {
    v.warnings.push_back(count(r.totals.dropped_total) +
                         " records were dropped while tracing (a buffer was full): the numbers below undercount");
  }
  v.tables.push_back(totals_table(r));
  v.tables.push_back(sites_table(r, max_rows));
  v.tables.push_back(regions_table(set, r, max_rows));
  v.tables.push_back(kernels_table(r, max_rows));
  v.tables.push_back(ranges_table(r, max_rows));
  v.tables.push_back(copies_table(r));
  v.tables.push_back(registration_table(r));
  v.tables.push_back(decisions_table(r));
  v.tables.push_back(steps_table(set, r));
  int n = 0;
  for (const Offender& o : r.offenders) {
    v.offenders.push_back(std::to_string(++n) + ". [" + human_duration(o.lost_ns) + "] " + o.hint);
  }
  return v;
}

}  // namespace gms::report
