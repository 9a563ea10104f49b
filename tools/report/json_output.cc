// `--json`: the report as one JSON document. The keys are a contract with scripts: every key is
// always present (zero, empty or null when there is nothing), and tools/report/README.md lists them.
#include "report/json_write.h"
#include "report/render.h"
#include "report/trace_reader.h"
#include "report/units.h"

namespace gms::report {
namespace {

void um_object(JsonWriter& w, const UmTally& u) {
  w.begin_object();
  w.key("htod_bytes"), w.value(u.htod);
  w.key("dtoh_bytes"), w.value(u.dtoh);
  // False where the CPU faulted and no migration to the host was recorded: dtoh_bytes is unknown.
  w.key("dtoh_known"), w.value(u.dtoh > 0 || u.cpu_faults == 0);
  w.key("dtod_bytes"), w.value(u.dtod);
  w.key("fault_htod_bytes"), w.value(u.fault_htod);
  w.key("fault_dtoh_bytes"), w.value(u.fault_dtoh);
  w.key("fault_htod_ns"), w.value(u.fault_htod_ns);
  w.key("fault_dtoh_ns"), w.value(u.fault_dtoh_ns);
  w.key("migration_ns"), w.value(u.migration_ns);
  w.key("gpu_faults"), w.value(u.gpu_faults);
  // False where migrations came on GPU faults none of which were recorded: the count is unknown.
  w.key("gpu_faults_known"), w.value(u.gpu_faults > 0 || u.fault_htod == 0);
  w.key("cpu_faults"), w.value(u.cpu_faults);
  w.key("thrashing"), w.value(u.thrashing);
  w.key("throttling"), w.value(u.throttling);
  w.key("remote_maps"), w.value(u.remote_maps);
  // The shim's page census (act/census.h): complete where CUPTI's migration records are not.
  w.key("page_to_gpu_bytes"), w.value(u.page_to_gpu);
  w.key("page_to_cpu_bytes"), w.value(u.page_to_cpu);
  w.end_object();
}

void copy_object(JsonWriter& w, const CopyTally& c) {
  w.begin_object();
  w.key("count"), w.value(c.count);
  w.key("bytes"), w.value(c.bytes);
  w.key("ns"), w.value(c.ns);
  w.key("pageable_count"), w.value(c.pageable_count);
  w.key("pageable_bytes"), w.value(c.pageable_bytes);
  w.key("pageable_ns"), w.value(c.pageable_ns);
  w.end_object();
}

void count_map(JsonWriter& w, const std::map<std::string, int64_t>& m) {
  w.begin_object();
  for (const auto& [k, v] : m) w.key(k), w.value(v);
  w.end_object();
}

void optional_int(JsonWriter& w, int64_t v) {
  if (v < 0) w.null();
  else w.value(v);
}

void traces(JsonWriter& w, const TraceSet& set) {
  w.key("traces");
  w.begin_array();
  for (const TraceFile& f : set.files) {
    w.begin_object();
    w.key("file"), w.value(f.path);
    w.key("version"), w.value(f.version);
    w.key("host"), w.value(f.host);
    w.key("pid"), w.value(f.pid);
    w.key("rank"), optional_int(w, f.rank);
    w.key("local_rank"), optional_int(w, f.local_rank);
    w.key("argv");
    w.begin_array();
    for (const std::string& a : f.argv) w.value(a);
    w.end_array();
    w.key("wall_t0"), w.value(f.wall_t0);
    w.key("offset_ns"), w.value(f.offset_ns);
    w.key("policy"), w.value(f.policy);
    w.key("cupti"), w.value(f.cupti);
    w.key("faults"), w.value(f.faults);
    w.key("driver_version"), w.value(f.driver_version);
    w.key("cuda_version"), w.value(f.cuda_version);
    w.key("devices");
    w.begin_array();
    for (const DeviceInfo& d : f.devices) {
      w.begin_object();
      w.key("index"), w.value(d.index);
      w.key("name"), w.value(d.name);
      w.key("total_bytes"), w.value(d.total_bytes);
      w.key("budget_bytes"), w.value(d.budget_bytes);
      w.key("pcie_gen"), w.value(d.pcie_gen);
      w.key("pcie_width"), w.value(d.pcie_width);
      w.end_object();
    }
    w.end_array();
    w.key("lines"), w.value(f.lines);
    w.key("truncated"), w.value(!f.ended);
    w.key("unknown_types"), count_map(w, f.unknown_types);
    w.key("unknown_keys"), w.value(f.unknown_keys);
    w.end_object();
  }
  w.end_array();
}

void totals(JsonWriter& w, const Report& r) {
  const Totals& t = r.totals;
  w.key("totals");
  w.begin_object();
  w.key("um"), um_object(w, t.um);
  w.key("census"), w.value(t.census);
  w.key("census_why"), w.value(t.census_why);
  w.key("migrated_bytes_by_cause");
  w.begin_object();
  for (const auto& [cause, n] : t.migrated_by_cause) w.key(cause), w.value(n);
  w.end_object();
  w.key("kernels"), w.value(t.kernels);
  w.key("kernel_ns"), w.value(t.kernel_ns);
  w.key("memsets"), w.value(t.memsets);
  w.key("memset_bytes"), w.value(t.memset_bytes);
  w.key("allocations"), w.value(t.allocations);
  w.key("alloc_bytes"), w.value(t.alloc_bytes);
  w.key("frees"), w.value(t.frees);
  w.key("regions"), w.value(r.regions_total);
  w.key("dropped_records");
  w.begin_object();
  w.key("shim"), w.value(t.dropped_shim);
  w.key("cupti"), w.value(t.dropped_cupti);
  w.key("other"), w.value(t.dropped_other);
  w.key("total"), w.value(t.dropped_total);
  w.end_object();
  w.key("unknown_types"), count_map(w, t.unknown_types);
  w.key("unknown_keys"), w.value(t.unknown_keys);
  w.end_object();
}

void sites(JsonWriter& w, const Report& r) {
  w.key("sites_by"), w.value(r.by_site ? "site" : "api");
  w.key("sites");
  w.begin_array();
  for (const SiteRow& s : r.sites) {
    w.begin_object();
    w.key("key"), w.value(s.key);
    w.key("frames");
    w.begin_array();
    for (const SiteFrame& f : s.frames) {
      w.begin_object();
      w.key("module"), w.value(f.module);
      w.key("offset"), w.value(f.offset);
      w.key("symbol");
      if (f.symbol.empty()) w.null();
      else w.value(f.symbol);
      w.end_object();
    }
    w.end_array();
    w.key("allocations"), w.value(s.allocations);
    w.key("alloc_bytes"), w.value(s.alloc_bytes);
    w.key("um"), um_object(w, s.um);
    w.key("copies"), copy_object(w, s.copies);
    w.end_object();
  }
  w.end_array();
}

void regions(JsonWriter& w, const TraceSet& set, const Report& r) {
  w.key("regions");
  w.begin_array();
  for (const RegionRow& g : r.regions) {
    const TraceFile& f = set.files[g.file];
    w.begin_object();
    w.key("file"), w.value(f.path);
    w.key("pid"), w.value(f.pid);
    w.key("rank"), optional_int(w, f.rank);
    w.key("ptr"), w.value(hex_address(g.ptr));
    w.key("bytes"), w.value(g.bytes);
    w.key("site"), w.value(g.site);
    w.key("api"), w.value(g.api);
    w.key("kind"), w.value(g.kind);
    w.key("placement"), w.value(g.placement);
    w.key("device"), w.value(static_cast<int64_t>(g.device));
    w.key("alloc_ns"), w.value(g.alloc_t);
    w.key("free_ns"), optional_int(w, g.free_t);
    w.key("um"), um_object(w, g.um);
    w.end_object();
  }
  w.end_array();
  w.key("unattributed_um"), um_object(w, r.unattributed);
}

void kernels(JsonWriter& w, const Report& r) {
  w.key("kernels");
  w.begin_array();
  for (const KernelRow& k : r.kernels) {
    w.begin_object();
    w.key("name"), w.value(k.name);
    w.key("demangled"), w.value(k.demangled);
    w.key("launches"), w.value(k.launches);
    w.key("time_ns"), w.value(k.time_ns);
    w.key("fault_time_ns"), w.value(k.fault_time_ns);
    w.key("um"), um_object(w, k.um);
    w.end_object();
  }
  w.end_array();
}

void ranges(JsonWriter& w, const Report& r) {
  w.key("ranges");
  w.begin_array();
  for (const RangeRow& g : r.ranges) {
    w.begin_object();
    w.key("domain"), w.value(g.domain);
    w.key("name"), w.value(g.name);
    w.key("count"), w.value(g.count);
    w.key("time_ns"), w.value(g.time_ns);
    w.key("um"), um_object(w, g.um);
    w.key("copies"), copy_object(w, g.copies);
    w.end_object();
  }
  w.end_array();
}

void copies(JsonWriter& w, const Report& r) {
  const CopySummary& c = r.copies;
  const LinkPeak& l = r.link;
  w.key("link");
  w.begin_object();
  w.key("pcie_gen"), w.value(l.gen);
  w.key("pcie_width"), w.value(l.width);
  w.key("assumed"), w.value(l.assumed);
  w.key("theoretical_gbps"), w.value_fixed(l.theoretical_gbps, 1);
  w.key("practical_gbps"), w.value_fixed(l.practical_gbps, 1);
  w.key("prefetch_gbps"), w.value_fixed(l.prefetch_gbps, 1);
  w.key("basis"), w.value(l.basis);
  w.end_object();
  w.key("copies");
  w.begin_object();
  w.key("source"), w.value(c.source);
  w.key("all"), copy_object(w, c.all);
  w.key("pinned_estimate_ns"), w.value(c.pinned_estimate_ns);
  w.key("kinds");
  w.begin_array();
  for (const CopyKindRow& k : c.kinds) {
    w.begin_object();
    w.key("kind"), w.value(k.kind);
    w.key("dir"), w.value(k.dir);
    w.key("host_kind"), w.value(k.host_kind);
    w.key("path"), w.value(k.path);
    w.key("count"), w.value(k.count);
    w.key("bytes"), w.value(k.bytes);
    w.key("ns"), w.value(k.ns);
    w.key("gbps"), w.value_fixed(k.gbps, 3);
    w.key("peak_gbps");
    if (k.peak_gbps > 0) w.value_fixed(k.peak_gbps, 1);
    else w.null();
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

void registration(JsonWriter& w, const Report& r) {
  const RegistrationSummary& s = r.registration;
  w.key("registration");
  w.begin_object();
  w.key("registers"), w.value(s.registers);
  w.key("register_bytes"), w.value(s.register_bytes);
  w.key("register_ns"), w.value(s.register_ns);
  w.key("register_why"), count_map(w, s.register_why);
  w.key("failed"), w.value(s.failed);
  w.key("failures"), count_map(w, s.failures);
  w.key("unregisters"), w.value(s.unregisters);
  w.key("unregister_bytes"), w.value(s.unregister_bytes);
  w.key("unregister_ns"), w.value(s.unregister_ns);
  w.key("unregister_why"), count_map(w, s.unregister_why);
  w.key("cache");
  if (!s.cache.seen) {
    w.null();
  } else {
    w.begin_object();
    w.key("hits"), w.value(s.cache.hits);
    w.key("misses"), w.value(s.cache.misses);
    w.key("evictions"), w.value(s.cache.evictions);
    w.key("invalidations"), w.value(s.cache.invalidations);
    w.key("bytes"), w.value(s.cache.bytes);
    w.end_object();
  }
  w.end_object();
}

void decisions(JsonWriter& w, const Report& r) {
  auto rows = [&](const char* key, const std::vector<DecisionRow>& list, bool with_reason) {
    w.key(key);
    w.begin_array();
    for (const DecisionRow& d : list) {
      w.begin_object();
      w.key("what"), w.value(d.what);
      if (with_reason) w.key("reason"), w.value(d.reason);
      w.key("count"), w.value(d.count);
      w.key("bytes"), w.value(d.bytes);
      w.end_object();
    }
    w.end_array();
  };
  rows("decisions", r.decisions, false);
  rows("decision_reasons", r.decision_reasons, true);
}

void steps(JsonWriter& w, const Report& r) {
  w.key("steps");
  w.begin_array();
  for (const StepRow& s : r.steps) {
    w.begin_object();
    w.key("file"), w.value(static_cast<int64_t>(s.file));
    if (!s.missing.empty()) {
      w.key("missing"), w.value(s.missing);
      w.end_object();
      continue;
    }
    w.key("period"), w.value(static_cast<int64_t>(s.period));
    w.key("steps"), w.value(static_cast<int64_t>(s.steps));
    w.key("first_launch"), w.value(static_cast<int64_t>(s.first));
    w.key("measured_ns"), w.value(s.measured_ns);
    w.key("busy_ns"), w.value(s.busy_ns);
    w.key("idle_ns"), w.value(s.idle_ns);
    w.key("idle_copying_ns"), w.value(s.idle_copying_ns);
    w.key("kernel_ns"), w.value(s.kernel_ns);
    w.key("copied_in"), w.value(s.copied_in);
    w.key("copied_out"), w.value(s.copied_out);
    w.key("copy_in_ns"), w.value(s.copy_in_ns);
    w.key("copy_out_ns"), w.value(s.copy_out_ns);
    w.key("copy_both_ns"), w.value(s.copy_both_ns);
    w.key("peak_bytes"), w.value(s.peak_bytes);
    w.key("budget"), w.value(s.budget);
    w.key("feasible"), w.value(s.feasible);
    w.key("bound_ns"), w.value(s.bound_ns);
    w.key("floor_ns"), w.value(s.floor_ns);
    if (s.floor_at >= 0) {
      w.key("floor_at"), w.value(s.floor_at);
      w.key("floor_kernel"), w.value(s.floor_kernel);
      w.key("floor_away"), w.value(s.floor_away);
      w.key("floor_out_ns"), w.value(s.floor_out_ns);
      w.key("floor_in_ns"), w.value(s.floor_in_ns);
    }
    w.key("plan_in"), w.value(s.plan_in);
    w.key("plan_out"), w.value(s.plan_out);
    w.key("plan_dropped"), w.value(s.plan_dropped);
    w.key("bound_copied_ns"), w.value(s.bound_copied_ns);
    w.key("floor_copied_ns"), w.value(s.floor_copied_ns);
    w.key("plan_copied_out"), w.value(s.plan_copied_out);
    w.end_object();
  }
  w.end_array();
}

void offenders(JsonWriter& w, const Report& r) {
  w.key("offenders");
  w.begin_array();
  for (const Offender& o : r.offenders) {
    w.begin_object();
    w.key("kind"), w.value(o.kind);
    w.key("subject"), w.value(o.subject);
    w.key("bytes"), w.value(o.bytes);
    w.key("count"), w.value(o.count);
    w.key("gbps"), w.value_fixed(o.gbps, 3);
    w.key("better_gbps"), w.value_fixed(o.better_gbps, 1);
    w.key("lost_ns"), w.value(o.lost_ns);
    w.key("hint"), w.value(o.hint);
    w.end_object();
  }
  w.end_array();
}

}  // namespace

bool write_json(const TraceSet& set, const Report& r, std::FILE* out) {
  JsonWriter w(out, true);
  w.begin_object();
  w.key("format"), w.value("gpumemshim-report");
  w.key("version"), w.value(int64_t{1});
  w.key("trace_version"), w.value(kTraceVersion);
  w.key("span_ns"), w.value(set.span_ns);
  traces(w, set);
  w.key("warnings");
  w.begin_array();
  for (const std::string& s : set.warnings) w.value(s);
  w.end_array();
  totals(w, r);
  sites(w, r);
  regions(w, set, r);
  kernels(w, r);
  ranges(w, r);
  copies(w, r);
  registration(w, r);
  decisions(w, r);
  steps(w, r);
  offenders(w, r);
  w.end_object();
  return w.flush();
}

}  // namespace gms::report
