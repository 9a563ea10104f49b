// The top offenders: what cost the most time that a known fix would save, each with a one-line hint.
// Candidates are ranked by that estimate (time taken minus the time at the rate the fix reaches),
// so a small problem in a hot loop outranks a large one that cost little.
#include <algorithm>
#include <cstdio>
#include <tuple>

#include "report/demangle.h"
#include "report/model.h"
#include "report/units.h"

namespace gms::report {
namespace {

std::string about(double gbps) {
  char text[32];
  std::snprintf(text, sizeof text, "about %.0f GB/s", gbps);
  return text;
}

double rate(uint64_t bytes, int64_t ns) { return ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0; }

// Time the bytes took minus the time they would take at `better` GB/s; never negative.
int64_t saved(uint64_t bytes, int64_t ns, double better) {
  if (better <= 0) return 0;
  int64_t ideal = static_cast<int64_t>(static_cast<double>(bytes) / better);
  return ns > ideal ? ns - ideal : 0;
}

std::string region_name(const TraceSet& set, const RegionRow& r) {
  std::string name = "region " + hex_address(r.ptr);
  std::string where = r.site;
  if (set.files.size() > 1) where += (where.empty() ? "" : ", ") + set.files[r.file].who();
  return where.empty() ? name : name + " (" + ellipsize(where, 60) + ")";
}

// Who moved a region: the kernels it came in during, the most first, and the CPU's faulting
// instructions. Empty when the trace says neither.
std::string movers(const TraceSet& set, const RegionRow& g) {
  std::string out;
  if (!g.gpu_kernels.empty()) {
    std::vector<std::pair<int64_t, uint32_t>> ks;
    for (const auto& [name, n] : g.gpu_kernels) ks.push_back({-n, name});
    std::sort(ks.begin(), ks.end());
    out += "; in during " + short_name(demangle(set.strings.str(ks[0].second)), 40);
    if (ks.size() > 1) out += " and " + counted(static_cast<int64_t>(ks.size() - 1), "other kernel", "other kernels");
  }
  if (g.um.cpu_faults > 0) {
    out += std::string(out.empty() ? "; " : ", ") + "back on " + human_count(g.um.cpu_faults) + " CPU faults";
    if (g.cpu_pcs.size() == 1) {
      out += " at instruction " + hex_address(g.cpu_pcs.begin()->first);
    } else if (!g.cpu_pcs.empty()) {
      out += " from " + (g.cpu_pcs.size() < RegionRow::kMaxPcs ? std::to_string(g.cpu_pcs.size()) : "many") + " instructions";
    }
  }
  return out;
}

void pageable_copies(const Report& r, std::vector<Offender>& out) {
  const double pinned = r.link.practical_gbps;
  auto add = [&](const std::string& subject, const std::string& from, const CopyTally& c) {
    if (c.pageable_bytes == 0) return;
    Offender o;
    o.kind = "pageable_copies";
    o.subject = subject;
    o.bytes = c.pageable_bytes;
    o.count = c.pageable_count;
    o.gbps = rate(c.pageable_bytes, c.pageable_ns);
    o.better_gbps = pinned;
    o.lost_ns = saved(c.pageable_bytes, c.pageable_ns, pinned);
    o.hint = "pageable copies " + from + ": " + human_bytes(c.pageable_bytes) + " at " + human_gbps(o.gbps) +
             "; pinned would be " + about(pinned) + " (pin the buffer or run with the shim's registration)";
    out.push_back(std::move(o));
  };
  bool any_site_copies = false;
  for (const SiteRow& s : r.sites) {
    if (s.copies.count == 0) continue;
    any_site_copies = true;
    add(s.key, (r.by_site ? "from " : "through ") + ellipsize(s.key, 60), s.copies);
  }
  // Only CUPTI's records: no call site to name, one line for all of them.
  if (!any_site_copies && r.copies.source == "memcpy") add("all copies", "(no call sites in the trace)", r.copies.all);
}

void fault_migrations(const TraceSet& set, const Report& r, std::vector<Offender>& out) {
  const double prefetch = r.link.prefetch_gbps;
  for (const KernelRow& k : r.kernels) {
    if (k.um.fault_htod == 0) continue;
    Offender o;
    o.kind = "fault_migration";
    o.subject = k.demangled;
    o.bytes = k.um.fault_htod;
    o.count = k.um.gpu_faults;
    // The kernels' own time: a fault-driven kernel runs at the speed of its migrations.
    o.gbps = rate(k.um.fault_htod, k.fault_time_ns);
    o.better_gbps = prefetch;
    o.lost_ns = saved(k.um.fault_htod, k.fault_time_ns, prefetch);
    o.hint = human_bytes(k.um.fault_htod) + " migrated on GPU page faults in kernel " + short_name(k.demangled, 60) +
             " (" + human_gbps(o.gbps) + "): prefetch before it (GPUMEMSHIM_POLICY=spill does) would move it at " +
             about(prefetch);
    out.push_back(std::move(o));
  }
  if (!r.kernels.empty()) return;
  // No kernel records (CUPTI's kernel activity was off): name the regions instead.
  for (const RegionRow& g : r.regions) {
    if (g.um.fault_htod == 0) continue;
    Offender o;
    o.kind = "fault_migration";
    o.subject = region_name(set, g);
    o.bytes = g.um.fault_htod;
    o.count = g.um.gpu_faults;
    o.gbps = rate(g.um.fault_htod, g.um.fault_htod_ns);
    o.better_gbps = prefetch;
    o.lost_ns = saved(g.um.fault_htod, g.um.fault_htod_ns, prefetch);
    o.hint = human_bytes(g.um.fault_htod) + " migrated on GPU page faults in " + o.subject + " (" +
             human_gbps(o.gbps) + "): prefetch it before the kernels that use it (GPUMEMSHIM_POLICY=spill does) at " +
             about(prefetch);
    out.push_back(std::move(o));
  }
}

void region_problems(const TraceSet& set, const Report& r, std::vector<Offender>& out) {
  const double prefetch = r.link.prefetch_gbps;
  for (const RegionRow& g : r.regions) {
    if (g.um.thrashing > 0) {
      Offender o;
      o.kind = "thrashing";
      o.subject = region_name(set, g);
      o.count = g.um.thrashing;
      const uint64_t on_faults = sat_sum(g.um.fault_htod, g.um.fault_dtoh);
      const int64_t fault_ns = sat_sum(g.um.fault_htod_ns, g.um.fault_dtoh_ns);
      o.bytes = on_faults;
      o.gbps = rate(on_faults, fault_ns);
      // Pages that ping-pong are better read in place over the link than moved back and forth:
      // the time spent moving them on faults is what a fix saves (prefetches and evictions the
      // program or the shim asked for are not the problem).
      o.lost_ns = fault_ns;
      o.hint = o.subject + " thrashed " + human_count(g.um.thrashing) + " times (" + human_bytes(on_faults) +
               " moved on faults in " + human_duration(fault_ns) +
               "): CPU and GPU take turns on its pages; keep it in one place (cudaMemAdviseSetPreferredLocation), "
               "as the default policy does for the program's managed memory after two rounds (decision share_host)";
      out.push_back(std::move(o));
    }
    // Two round trips or more (to the device, back, to the device, back): the CPU and the GPU take
    // turns on it, whether the moves came on faults or as prefetches.
    // The page census sees every turn and byte where CUPTI's records drop some.
    const int64_t turns = std::max(g.um.turns, g.um.page_turns);
    if (turns >= 3) {
      Offender o;
      o.kind = "ping_pong";
      o.subject = region_name(set, g);
      const int64_t rounds = (turns + 1) / 2;
      o.count = rounds;
      o.bytes = std::max(g.um.migrated(), g.um.page_moved());
      const uint64_t recorded = g.um.migrated();
      o.gbps = rate(recorded, g.um.migration_ns);
      // Read in place over the link (or moved once), none of the moving back and forth is needed:
      // the time CUPTI's records took; where the census saw more bytes, those bytes at CUPTI's rate
      // if its records cover a tenth of them or more, else at the link's bulk rate (a floor: moves
      // on faults are slower), so that a region only the census saw is still named.
      const double gbps = o.gbps > 0 && recorded >= o.bytes / 10 ? o.gbps : prefetch;
      o.lost_ns = o.bytes > recorded && gbps > 0
                      ? static_cast<int64_t>(std::min(static_cast<double>(o.bytes) / gbps, 1e18))
                      : g.um.migration_ns;
      o.hint = o.subject + " went to the GPU and back " + human_count(rounds) + " times (" +
               human_bytes(o.bytes / static_cast<uint64_t>(rounds)) + " a round, " + human_duration(o.lost_ns) +
               " moving)" + movers(set, g) +
               ": the CPU and the GPU take turns on it; keep it on the host and let kernels read it over the "
               "link (cudaMemAdviseSetPreferredLocation to the CPU, SetAccessedBy the GPU: what the default policy "
               "does after two rounds, decision share_host), or move only the pages the CPU touches";
      out.push_back(std::move(o));
    }
    if (g.um.fault_dtoh > 0) {
      Offender o;
      o.kind = "cpu_fault_migration";
      o.subject = region_name(set, g);
      o.bytes = g.um.fault_dtoh;
      o.count = g.um.cpu_faults;
      o.gbps = rate(g.um.fault_dtoh, g.um.fault_dtoh_ns);
      o.better_gbps = prefetch;
      o.lost_ns = saved(g.um.fault_dtoh, g.um.fault_dtoh_ns, prefetch);
      o.hint = human_count(g.um.cpu_faults) + " CPU page faults on " + o.subject + " pulled " +
               human_bytes(g.um.fault_dtoh) + " back at " + human_gbps(o.gbps) +
               ": prefetch it to the host in one call (cudaMemPrefetchAsync to the CPU) before the CPU reads it, " +
               about(prefetch);
      out.push_back(std::move(o));
    }
  }
}

void registration_cost(const Report& r, std::vector<Offender>& out) {
  const RegistrationSummary& s = r.registration;
  int64_t ns = sat_sum(s.register_ns, s.unregister_ns);
  if (s.registers == 0 || ns == 0) return;
  Offender o;
  o.kind = "registration";
  o.subject = "host registration";
  o.bytes = s.register_bytes;
  o.count = s.registers;
  o.lost_ns = ns;
  o.hint = "registering host memory took " + human_duration(ns) + " over " +
           counted(s.registers, "registration", "registrations") + " and " +
           counted(s.unregisters, "unregistration", "unregistrations") + " of " + human_bytes(s.register_bytes);
  if (s.cache.seen && sat_sum(s.cache.hits, s.cache.misses) > 0) {
    o.hint += " (cache hit rate " +
              percent(static_cast<double>(s.cache.hits) / static_cast<double>(s.cache.hits + s.cache.misses)) + ")";
  }
  o.hint += ": reuse host buffers so that their registrations are reused rather than repeated";
  out.push_back(std::move(o));
}

}  // namespace

void find_offenders(const TraceSet& set, const Report& r, int top, std::vector<Offender>* out) {
  std::vector<Offender> all;
  pageable_copies(r, all);
  fault_migrations(set, r, all);
  region_problems(set, r, all);
  registration_cost(r, all);
  // A candidate that would gain nothing (already at the better rate) is no offender; thrashing
  // always is, even when its records carry no duration.
  all.erase(std::remove_if(all.begin(), all.end(),
                           [](const Offender& o) { return o.lost_ns <= 0 && o.kind != "thrashing"; }),
            all.end());
  std::stable_sort(all.begin(), all.end(), [](const Offender& a, const Offender& b) {
    return std::make_tuple(a.lost_ns, a.bytes, b.kind, b.subject) > std::make_tuple(b.lost_ns, b.bytes, a.kind, a.subject);
  });
  if (top >= 0 && all.size() > static_cast<size_t>(top)) all.resize(static_cast<size_t>(top));
  *out = std::move(all);
}

}  // namespace gms::report
