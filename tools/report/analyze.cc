// The aggregation: totals, per site (or API), per region, per kernel, per NVTX range. Copies,
// registration, decisions and offenders have their own files.
#include <algorithm>
#include <unordered_map>
#include <map>
#include <tuple>

#include "report/demangle.h"
#include "report/model.h"
#include "report/sweep.h"

namespace gms::report {
namespace {

bool is_migration(const UmEvent& e, const KnownIds& k) {
  return e.counter == k.htod || e.counter == k.dtoh || e.counter == k.dtod;
}

// CUPTI reports GPU faults as groups: `value` is the number of faults in the record. A CPU fault
// record is one fault: its `value` is the faulting instruction's address, not a count (summed, it
// made counts like 907,452,736,313,848,329).
int64_t fault_count(const UmEvent& e) { return e.value > 0 ? e.value : 1; }

template <class V>
void sort_by_time(V& v) {
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.t < b.t; });
}

void sort_events(TraceSet& set) {
  // Files hold events in the order they were written; CUPTI records arrive in buffers, late.
  for (TraceFile& f : set.files) {
    sort_by_time(f.allocs);
    sort_by_time(f.frees);
    sort_by_time(f.copies);
    sort_by_time(f.decisions);
    sort_by_time(f.budgets);
    sort_by_time(f.registrations);
    sort_by_time(f.kernels);
    sort_by_time(f.memcpys);
    sort_by_time(f.memsets);
    sort_by_time(f.um);
    sort_by_time(f.pages);
    sort_by_time(f.ranges);
  }
}

// Names what the per-site table groups by: a call site when the trace has sites, else the API.
class SiteKeys {
 public:
  SiteKeys(const TraceSet& set, bool by_site) : set_(set), by_site_(by_site) {}

  std::string key(const TraceFile& f, uint32_t site, uint32_t api) const {
    if (!by_site_) return api ? set_.strings.str(api) : "(unknown API)";
    if (!site) return "(no site)";
    auto it = f.sites.find(site);
    if (it == f.sites.end()) return "site #" + set_.strings.str(site);
    std::string label = site_label(it->second);
    return label.empty() ? "site #" + set_.strings.str(site) : label;
  }

  const std::vector<SiteFrame>* frames(const TraceFile& f, uint32_t site) const {
    if (!by_site_ || !site) return nullptr;
    auto it = f.sites.find(site);
    return it == f.sites.end() ? nullptr : &it->second;
  }

 private:
  const TraceSet& set_;
  bool by_site_;
};

void add_totals(const TraceSet& set, Totals& t) {
  const KnownIds& k = set.ids;
  int64_t end_dropped = 0;
  for (const TraceFile& f : set.files) {
    for (const UmEvent& e : f.um) {
      t.um.add(e, k);
      if (is_migration(e, k)) {
        const std::string& cause = set.strings.str(e.cause);
        add_to(t.migrated_by_cause[cause.empty() ? "unknown" : cause], e.bytes);
      }
    }
    for (const PagesEvent& e : f.pages) t.um.add(e);
    if (f.census_state) {
      const std::string& state = set.strings.str(f.census_state);
      if (t.census.empty() || (t.census == "on" && state != "on")) {
        t.census = state;
        t.census_why = set.strings.str(f.census_why);
      }
    }
    add_to(t.dropped_shim, f.dropped_shim);
    add_to(t.dropped_cupti, f.dropped_cupti);
    add_to(t.dropped_other, f.dropped_other);
    add_to(end_dropped, f.end_dropped);
    add_to(t.kernels, static_cast<int64_t>(f.kernels.size()));
    for (const KernelEvent& e : f.kernels) add_to(t.kernel_ns, e.end - e.t);
    add_to(t.memsets, static_cast<int64_t>(f.memsets.size()));
    for (const MemsetEvent& e : f.memsets) add_to(t.memset_bytes, e.bytes);
    add_to(t.allocations, static_cast<int64_t>(f.allocs.size()));
    for (const AllocEvent& e : f.allocs) add_to(t.alloc_bytes, e.bytes);
    add_to(t.frees, static_cast<int64_t>(f.frees.size()));
    add_to(t.unknown_keys, f.unknown_keys);
    for (const auto& [type, n] : f.unknown_types) add_to(t.unknown_types[type], n);
  }
  // `dropped` lines say where records were lost; the `end` line's total also covers any whose
  // `dropped` line was itself lost.
  t.dropped_total = std::max(sat_sum(sat_sum(t.dropped_shim, t.dropped_cupti), t.dropped_other), end_dropped);
}

// Every um record goes to the region that was live at its address at its time: allocs and frees
// are replayed in time order alongside the records.
void attribute_regions(const TraceSet& set, size_t fi, const SiteKeys& keys, Report& r,
                       std::map<std::string, SiteRow>& sites) {
  const TraceFile& f = set.files[fi];
  const KnownIds& k = set.ids;
  std::vector<RegionRow> regions;
  regions.reserve(f.allocs.size());
  for (const AllocEvent& a : f.allocs) {
    RegionRow row;
    row.file = fi;
    row.ptr = a.ptr;
    row.bytes = a.bytes;
    row.site = keys.key(f, a.site, a.api);
    row.api = set.strings.str(a.api);
    row.kind = set.strings.str(a.kind);
    row.placement = set.strings.str(a.placement);
    row.device = a.device;
    row.alloc_t = a.t;
    SiteRow& s = sites[row.site];
    ++s.allocations;
    add_to(s.alloc_bytes, a.bytes);
    if (s.frames.empty())
      if (const auto* fr = keys.frames(f, a.site)) s.frames = *fr;
    regions.push_back(std::move(row));
  }
  std::map<uint64_t, uint32_t> live;  // start address -> region
  size_t next_alloc = 0, next_free = 0;
  // Replays allocs and frees up to time t; at equal times a free goes first (a block freed and
  // allocated again at the same address).
  auto replay_until = [&](int64_t t) {
    for (;;) {
      bool alloc_ready = next_alloc < f.allocs.size() && f.allocs[next_alloc].t <= t;
      bool free_ready = next_free < f.frees.size() && f.frees[next_free].t <= t;
      if (!alloc_ready && !free_ready) return;
      if (free_ready && (!alloc_ready || f.frees[next_free].t <= f.allocs[next_alloc].t)) {
        const FreeEvent& e = f.frees[next_free++];
        auto it = live.find(e.ptr);
        if (it != live.end()) {
          regions[it->second].free_t = e.t;
          live.erase(it);
        }
      } else {
        uint32_t index = static_cast<uint32_t>(next_alloc);
        const AllocEvent& e = f.allocs[next_alloc++];
        auto [it, inserted] = live.emplace(e.ptr, index);
        if (!inserted) {  // its free was not seen: the new region replaces it
          regions[it->second].free_t = e.t;
          it->second = index;
        }
      }
    }
  };
  // Kernels by start, to find the one running when a migration to the device happened.
  std::vector<uint32_t> by_start(f.kernels.size());
  for (uint32_t i = 0; i < by_start.size(); ++i) by_start[i] = i;
  std::sort(by_start.begin(), by_start.end(), [&](uint32_t a, uint32_t b) { return f.kernels[a].t < f.kernels[b].t; });
  auto running_at = [&](int64_t t, int32_t device) -> const KernelEvent* {
    auto it = std::upper_bound(by_start.begin(), by_start.end(), t,
                               [&](int64_t v, uint32_t i) { return v < f.kernels[i].t; });
    // The latest few to start before t: kernels on one device seldom overlap more than that.
    for (int back = 0; back < 8 && it != by_start.begin(); ++back) {
      const KernelEvent& ke = f.kernels[*--it];
      if (ke.end >= t && (device < 0 || ke.device == device)) return &ke;
    }
    return nullptr;
  };
  for (const UmEvent& e : f.um) {
    replay_until(e.t);
    auto it = live.upper_bound(e.address);
    RegionRow* region = nullptr;
    if (it != live.begin()) {
      --it;
      RegionRow& candidate = regions[it->second];
      if (e.address - candidate.ptr < std::max<uint64_t>(candidate.bytes, 1)) region = &candidate;
    }
    if (!region) {
      r.unattributed.add(e, k);
      continue;
    }
    region->um.add(e, k);
    if (e.counter == k.htod && (e.cause == k.coherence || e.cause == k.speculative)) {
      // Pulled in by a kernel's faults (a prefetch moves it whoever runs at the time).
      if (const KernelEvent* ke = running_at(e.t, e.device)) ++region->gpu_kernels[ke->name];
    } else if (e.counter == k.cpu_fault) {
      auto pc = region->cpu_pcs.find(static_cast<uint64_t>(e.value));
      if (pc != region->cpu_pcs.end()) ++pc->second;
      else if (region->cpu_pcs.size() < RegionRow::kMaxPcs) region->cpu_pcs.emplace(static_cast<uint64_t>(e.value), 1);
    }
  }
  replay_until(INT64_MAX);
  // A census line names its region by base address: the region made there last before it (a look
  // at a free comes before the free's own line), found by a binary search over that base's regions
  // in time order (allocs are sorted).
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_base;
  for (uint32_t i = 0; i < regions.size(); ++i) by_base[regions[i].ptr].push_back(i);
  for (const PagesEvent& e : f.pages) {
    RegionRow* region = nullptr;
    auto it = by_base.find(e.ptr);
    if (it != by_base.end()) {
      const std::vector<uint32_t>& v = it->second;
      auto after = std::upper_bound(v.begin(), v.end(), e.t,
                                    [&](int64_t t, uint32_t i) { return t < regions[i].alloc_t; });
      if (after != v.begin()) region = &regions[*(after - 1)];
    }
    if (region) region->um.add(e);
    else r.unattributed.add(e);
  }
  add_to(r.regions_total, static_cast<int64_t>(regions.size()));
  for (RegionRow& row : regions) {
    if (row.um.empty()) continue;
    sites[row.site].um.add(row.um);
    r.regions.push_back(std::move(row));
  }
}

void add_copies_to_sites(const TraceSet& set, const TraceFile& f, const SiteKeys& keys,
                         std::map<std::string, SiteRow>& sites) {
  const KnownIds& k = set.ids;
  for (const CopyEvent& c : f.copies) {
    SiteRow& s = sites[keys.key(f, c.site, c.api)];
    if (s.frames.empty())
      if (const auto* fr = keys.frames(f, c.site)) s.frames = *fr;
    ++s.copies.count;
    add_to(s.copies.bytes, c.bytes);
    add_to(s.copies.ns, c.dur);
    if (c.host_kind == k.pageable && (c.path == k.driver || c.path == 0)) {
      ++s.copies.pageable_count;
      add_to(s.copies.pageable_bytes, c.bytes);
      add_to(s.copies.pageable_ns, c.dur);
    }
  }
}

void attribute_kernels(const TraceSet& set, std::vector<KernelRow>& out) {
  const KnownIds& k = set.ids;
  std::map<uint32_t, size_t> row_of;  // kernel name -> row
  for (const TraceFile& f : set.files) {
    std::map<int32_t, std::vector<Span>> spans;  // per device
    std::vector<size_t> row(f.kernels.size());
    for (size_t i = 0; i < f.kernels.size(); ++i) {
      const KernelEvent& e = f.kernels[i];
      auto [it, inserted] = row_of.emplace(e.name, out.size());
      if (inserted) {
        out.push_back(KernelRow{set.strings.str(e.name), 0, 0, 0, {}, {}});
        out.back().demangled = demangle(out.back().name);
      }
      row[i] = it->second;
      KernelRow& kr = out[it->second];
      ++kr.launches;
      add_to(kr.time_ns, e.end - e.t);
      spans[e.device].push_back({e.t, e.end, static_cast<uint32_t>(i)});
    }
    std::vector<bool> faulted(f.kernels.size(), false);
    for (auto& [device, list] : spans) {
      std::vector<std::pair<int64_t, uint32_t>> times;
      for (size_t i = 0; i < f.um.size(); ++i) {
        if (f.um[i].device == device) times.push_back({f.um[i].t, static_cast<uint32_t>(i)});
      }
      for_each_inside(list, times, [&](uint32_t kernel, uint32_t um) {
        const UmEvent& e = f.um[um];
        out[row[kernel]].um.add(e, k);
        if (e.counter == k.htod && (e.cause == k.coherence || e.cause == k.speculative)) faulted[kernel] = true;
      });
    }
    for (size_t i = 0; i < f.kernels.size(); ++i) {
      if (faulted[i]) add_to(out[row[i]].fault_time_ns, f.kernels[i].end - f.kernels[i].t);
    }
  }
}

void attribute_ranges(const TraceSet& set, bool use_memcpy, std::vector<RangeRow>& out) {
  const KnownIds& k = set.ids;
  std::map<std::pair<uint32_t, uint32_t>, size_t> row_of;  // (domain, name) -> row
  for (const TraceFile& f : set.files) {
    std::vector<Span> spans;
    std::vector<size_t> row(f.ranges.size());
    for (size_t i = 0; i < f.ranges.size(); ++i) {
      const RangeEvent& e = f.ranges[i];
      auto [it, inserted] = row_of.emplace(std::make_pair(e.domain, e.name), out.size());
      if (inserted) out.push_back(RangeRow{set.strings.str(e.domain), set.strings.str(e.name), 0, 0, {}, {}});
      row[i] = it->second;
      ++out[it->second].count;
      add_to(out[it->second].time_ns, e.end - e.t);
      spans.push_back({e.t, e.end, static_cast<uint32_t>(i)});
    }
    if (spans.empty()) continue;
    std::vector<std::pair<int64_t, uint32_t>> times;
    for (size_t i = 0; i < f.um.size(); ++i) times.push_back({f.um[i].t, static_cast<uint32_t>(i)});
    for_each_inside(spans, times, [&](uint32_t range, uint32_t um) { out[row[range]].um.add(f.um[um], k); });
    times.clear();
    if (use_memcpy) {
      for (size_t i = 0; i < f.memcpys.size(); ++i) times.push_back({f.memcpys[i].t, static_cast<uint32_t>(i)});
      for_each_inside(spans, times, [&](uint32_t range, uint32_t c) {
        const MemcpyEvent& e = f.memcpys[c];
        CopyTally& t = out[row[range]].copies;
        ++t.count;
        add_to(t.bytes, e.bytes);
        add_to(t.ns, e.end - e.t);
      });
    } else {
      for (size_t i = 0; i < f.copies.size(); ++i) times.push_back({f.copies[i].t, static_cast<uint32_t>(i)});
      for_each_inside(spans, times, [&](uint32_t range, uint32_t c) {
        const CopyEvent& e = f.copies[c];
        CopyTally& t = out[row[range]].copies;
        ++t.count;
        add_to(t.bytes, e.bytes);
        add_to(t.ns, e.dur);
      });
    }
  }
}

}  // namespace

void UmTally::add(const UmEvent& e, const KnownIds& k) {
  const int64_t dur = e.end - e.t;
  const bool on_fault = e.cause == k.coherence || e.cause == k.speculative;
  auto way = [this](uint8_t w) {
    if (last_way != 0 && last_way != w) ++turns;
    last_way = w;
  };
  if (e.counter == k.htod) {
    way(1);
    add_to(htod, e.bytes);
    add_to(migration_ns, dur);
    if (on_fault) add_to(fault_htod, e.bytes), add_to(fault_htod_ns, dur);
  } else if (e.counter == k.dtoh) {
    if (on_fault) way(2);  // the CPU touched it (an eviction to make room is no turn of the CPU's)
    add_to(dtoh, e.bytes);
    add_to(migration_ns, dur);
    if (on_fault) add_to(fault_dtoh, e.bytes), add_to(fault_dtoh_ns, dur);
  } else if (e.counter == k.dtod) {
    add_to(dtod, e.bytes);
    add_to(migration_ns, dur);
  } else if (e.counter == k.gpu_fault) {
    add_to(gpu_faults, fault_count(e));
  } else if (e.counter == k.cpu_fault) {
    way(2);
    add_to(cpu_faults, 1);
  } else if (e.counter == k.thrashing) {
    ++thrashing;
  } else if (e.counter == k.throttling) {
    ++throttling;
  } else if (e.counter == k.remote_map) {
    ++remote_maps;
  }
}

void UmTally::add(const PagesEvent& e) {
  // Within one look, what left the CPU counts first: at a launch's look, what left did so before
  // the synchronisation after which the CPU took pages back; at a synchronisation's look, the CPU
  // took nothing back since the launch's look (it touches managed memory only once synchronised).
  auto way = [this](uint8_t w) {
    if (page_last_way != 0 && page_last_way != w) ++page_turns;
    page_last_way = w;
  };
  if (e.to_gpu) way(1), add_to(page_to_gpu, e.to_gpu);
  if (e.to_cpu) way(2), add_to(page_to_cpu, e.to_cpu);
}

void UmTally::add(const UmTally& o) {
  for (uint64_t UmTally::*m : {&UmTally::htod, &UmTally::dtoh, &UmTally::dtod, &UmTally::fault_htod, &UmTally::fault_dtoh,
                               &UmTally::page_to_gpu, &UmTally::page_to_cpu})
    add_to(this->*m, o.*m);
  for (int64_t UmTally::*m : {&UmTally::fault_htod_ns, &UmTally::fault_dtoh_ns, &UmTally::gpu_faults, &UmTally::cpu_faults,
                              &UmTally::thrashing, &UmTally::throttling, &UmTally::remote_maps, &UmTally::migration_ns,
                              &UmTally::turns, &UmTally::page_turns})
    add_to(this->*m, o.*m);
}

std::string site_label(const std::vector<SiteFrame>& frames) {
  // The shim's own frames and CUDA's libraries say nothing about which line of the program it was.
  auto is_plumbing = [](const std::string& module) {
    std::string base = module.substr(module.find_last_of('/') + 1);
    for (const char* prefix : {"libgpumemshim", "libcuda.", "libcudart", "libcupti"}) {
      if (base.rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  auto where = [](const SiteFrame& fr) {
    if (fr.module.empty()) return fr.offset;
    return fr.module.substr(fr.module.find_last_of('/') + 1) + "+" + fr.offset;
  };
  // The innermost frame of the program, and the innermost one with a name: a static helper that
  // dladdr cannot name often sits between the allocation and the function that matters.
  bool all_plumbing = std::all_of(frames.begin(), frames.end(), [&](const SiteFrame& f) { return is_plumbing(f.module); });
  const SiteFrame* first = nullptr;
  const SiteFrame* named = nullptr;
  for (const SiteFrame& fr : frames) {
    if (!all_plumbing && is_plumbing(fr.module)) continue;
    if (!first) first = &fr;
    if (!fr.symbol.empty()) {
      named = &fr;
      break;
    }
  }
  if (!first) return "";
  if (named == first) return named->symbol;
  // Both, so that two sites named by the same caller through different helpers stay apart.
  if (named) return named->symbol + " [" + where(*first) + "]";
  return where(*first);
}

Report analyze(TraceSet& set, const AnalyzeOptions& options) {
  sort_events(set);
  Report r;
  add_totals(set, r.totals);

  r.by_site = std::any_of(set.files.begin(), set.files.end(), [](const TraceFile& f) { return !f.sites.empty(); });
  SiteKeys keys(set, r.by_site);
  std::map<std::string, SiteRow> sites;
  for (size_t fi = 0; fi < set.files.size(); ++fi) {
    attribute_regions(set, fi, keys, r, sites);
    add_copies_to_sites(set, set.files[fi], keys, sites);
  }
  for (auto& [key, row] : sites) {
    row.key = key;
    r.sites.push_back(std::move(row));
  }
  auto activity = [](const SiteRow& s) { return sat_sum(s.um.migrated(), s.copies.bytes); };
  std::stable_sort(r.sites.begin(), r.sites.end(), [&](const SiteRow& a, const SiteRow& b) {
    return std::make_tuple(activity(a), a.alloc_bytes, b.key) > std::make_tuple(activity(b), b.alloc_bytes, a.key);
  });
  std::stable_sort(r.regions.begin(), r.regions.end(), [](const RegionRow& a, const RegionRow& b) {
    auto key = [](const RegionRow& x) {
      return std::make_tuple(x.um.migrated(), sat_sum(x.um.gpu_faults, x.um.cpu_faults), x.um.thrashing);
    };
    if (key(a) != key(b)) return key(a) > key(b);
    return std::make_tuple(a.file, a.ptr, a.alloc_t) < std::make_tuple(b.file, b.ptr, b.alloc_t);
  });

  attribute_kernels(set, r.kernels);
  std::stable_sort(r.kernels.begin(), r.kernels.end(), [](const KernelRow& a, const KernelRow& b) {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.name < b.name;
  });

  summarize_copies(set, r);
  attribute_ranges(set, r.copies.source == "memcpy", r.ranges);
  std::stable_sort(r.ranges.begin(), r.ranges.end(), [](const RangeRow& a, const RangeRow& b) {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : std::tie(a.domain, a.name) < std::tie(b.domain, b.name);
  });
  summarize_registration(set, r);
  summarize_decisions(set, r);
  for (size_t f = 0; f < set.files.size(); ++f) r.steps.push_back(find_step(set, f, nullptr, options.budget));
  find_offenders(set, r, options.top, &r.offenders);
  return r;
}

}  // namespace gms::report
