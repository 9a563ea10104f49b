#include "report/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "report/units.h"

namespace gms::report {
namespace {

// The unit of the time axis: whatever keeps its numbers short.
struct TimeAxis {
  double ns_per_unit;
  std::string label;
};

TimeAxis time_axis(int64_t span_ns) {
  if (span_ns < 2000000) return {1e3, "time since the start of the trace (us)"};
  if (span_ns < 2000000000) return {1e6, "time since the start of the trace (ms)"};
  return {1e9, "time since the start of the trace (s)"};
}

double in_units(int64_t ns, const TimeAxis& axis) { return static_cast<double>(ns) / axis.ns_per_unit; }

// Bytes per fixed-width time bin, each transfer spread evenly over its own duration.
class Binner {
 public:
  Binner(int64_t span_ns, size_t bins) : bin_ns_(std::max<int64_t>(1, (span_ns + bins - 1) / bins)), bytes_(bins, 0) {}

  void add(int64_t t, int64_t end, uint64_t bytes) {
    total_ += bytes;
    if (end <= t) {
      bytes_[index(t)] += static_cast<double>(bytes);
      return;
    }
    const double per_ns = static_cast<double>(bytes) / static_cast<double>(end - t);
    for (size_t b = index(t); b <= index(end - 1); ++b) {
      int64_t lo = std::max<int64_t>(t, static_cast<int64_t>(b) * bin_ns_);
      int64_t hi = std::min<int64_t>(end, static_cast<int64_t>(b + 1) * bin_ns_);
      if (hi > lo) bytes_[b] += per_ns * static_cast<double>(hi - lo);
    }
  }

  uint64_t total() const { return total_; }

  // GB/s per bin as step points, ending at the last bin's end.
  std::vector<std::pair<double, double>> rates(const TimeAxis& axis, double* max_rate) const {
    std::vector<std::pair<double, double>> out;
    for (size_t b = 0; b < bytes_.size(); ++b) {
      double gbps = bytes_[b] / static_cast<double>(bin_ns_);
      *max_rate = std::max(*max_rate, gbps);
      out.push_back({in_units(static_cast<int64_t>(b) * bin_ns_, axis), gbps});
    }
    out.push_back({in_units(static_cast<int64_t>(bytes_.size()) * bin_ns_, axis), out.back().second});
    return out;
  }

  int64_t bin_ns() const { return bin_ns_; }

 private:
  size_t index(int64_t t) const {
    return std::min<size_t>(bytes_.size() - 1, static_cast<size_t>(std::max<int64_t>(0, t) / bin_ns_));
  }
  int64_t bin_ns_;
  std::vector<double> bytes_;
  uint64_t total_ = 0;
};

const char* direction_words(const std::string& dir) {
  if (dir == "htod") return "host to device";
  if (dir == "dtoh") return "device to host";
  if (dir == "dtod") return "device to device";
  if (dir == "peer") return "peer";
  if (dir == "htoh") return "host to host";
  return "other";
}

// Keeps about `limit` points of a long series, evenly spread, and says how many it kept.
size_t thin(std::vector<std::pair<double, double>>& points, size_t limit) {
  if (points.size() <= limit) return 1;
  size_t stride = (points.size() + limit - 1) / limit;
  std::vector<std::pair<double, double>> kept;
  for (size_t i = 0; i < points.size(); i += stride) kept.push_back(points[i]);
  points.swap(kept);
  return stride;
}

// A step series of many points (a budget line per millisecond for hours) kept to about `buckets`
// points: per bucket of x, its highest point, so that no peak of memory use disappears.
void reduce_steps(std::vector<std::pair<double, double>>& points, size_t buckets) {
  if (points.size() <= 2 * buckets) return;
  const double x0 = points.front().first, x1 = points.back().first;
  const double width = (x1 - x0) / static_cast<double>(buckets);
  if (!(width > 0)) return;
  std::vector<std::pair<double, double>> kept;
  size_t current = SIZE_MAX;
  for (const auto& p : points) {
    size_t b = std::min(buckets - 1, static_cast<size_t>((p.first - x0) / width));
    if (b != current) {
      kept.push_back({x0 + static_cast<double>(b) * width, p.second});
      current = b;
    } else {
      kept.back().second = std::max(kept.back().second, p.second);
    }
  }
  kept.push_back(points.back());
  points.swap(kept);
}

}  // namespace

Plot bandwidth_plot(const TraceSet& set, const Report& r) {
  const KnownIds& k = set.ids;
  const size_t bins = 200;
  TimeAxis axis = time_axis(set.span_ns);
  // Fixed order, so that a direction keeps its color from one report to the next.
  std::map<std::string, Binner> series;
  const std::vector<std::string> order = {"migrations htod", "migrations dtoh", "migrations dtod", "copies htod",
                                          "copies dtoh",     "copies dtod",     "copies peer",     "copies htoh"};
  for (const std::string& name : order) series.emplace(name, Binner(set.span_ns, bins));
  for (const TraceFile& f : set.files) {
    for (const UmEvent& e : f.um) {
      if (e.counter == k.htod || e.counter == k.dtoh || e.counter == k.dtod)
        series.at("migrations " + set.strings.str(e.counter)).add(e.t, e.end, e.bytes);
    }
    if (r.copies.source == "memcpy") {
      for (const MemcpyEvent& e : f.memcpys) {
        auto it = series.find("copies " + set.strings.str(e.copy_kind));
        if (it != series.end()) it->second.add(e.t, e.end, e.bytes);
      }
    } else {
      for (const CopyEvent& e : f.copies) {
        auto it = series.find("copies " + set.strings.str(e.dir));
        if (it != series.end()) it->second.add(e.t, e.t + e.dur, e.bytes);
      }
    }
  }
  XYChart c;
  c.id = "plot-bandwidth";
  c.title = "Bandwidth over time, per direction (migrations and explicit copies)";
  c.x_label = axis.label;
  c.y_label = "bandwidth (GB/s)";
  c.x_max = in_units(set.span_ns, axis);
  double max_rate = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const Binner& b = series.at(order[i]);
    if (b.total() == 0) continue;
    PlotSeries s;
    std::string kind = order[i].substr(0, order[i].find(' '));
    s.label = kind + " " + direction_words(order[i].substr(order[i].find(' ') + 1));
    s.color = kPalette[i % 8];
    s.style = PlotSeries::Style::kStep;
    s.points = b.rates(axis, &max_rate);
    c.series.push_back(std::move(s));
  }
  c.y_max = max_rate > 0 ? max_rate * 1.1 : 1;
  c.empty_message = "no migrations or copies in the trace";
  Plot p;
  p.svg = render_svg(c);
  int64_t bin = series.begin()->second.bin_ns();
  p.caption = "Bytes moved per " + human_duration(bin) +
              " interval, each transfer spread over its own duration. Copies: " +
              (r.copies.source == "memcpy" ? "CUPTI's records (device time)." : "the shim's copy calls (host time).");
  return p;
}

Plot memory_plot(const TraceSet& set) {
  const KnownIds& k = set.ids;
  TimeAxis axis = time_axis(set.span_ns);
  XYChart c;
  c.id = "plot-memory";
  c.title = "Device memory in use against the budget";
  c.x_label = axis.label;
  c.y_label = "device memory (GB)";
  c.x_max = in_units(set.span_ns, axis);
  const double end_x = c.x_max;
  double max_y = 0;
  bool any_budget = false;
  for (const TraceFile& f : set.files) any_budget = any_budget || !f.budgets.empty();
  size_t color = 0;
  auto gb = [](int64_t b) { return static_cast<double>(b) / 1e9; };
  auto prefix = [&](const TraceFile& f, int32_t device) {
    std::string p = set.files.size() > 1 ? f.who() + ", " : "";
    return p + "GPU " + std::to_string(device);
  };
  auto add = [&](std::string label, PlotSeries::Style style, const char* colour,
                 std::vector<std::pair<double, double>> pts) {
    if (pts.empty()) return;
    reduce_steps(pts, 1000);
    pts.push_back({end_x, pts.back().second});
    for (const auto& pt : pts) max_y = std::max(max_y, pt.second);
    c.series.push_back({std::move(label), colour, style, std::move(pts), 2.5});
  };
  std::string caption;
  if (any_budget) {
    caption = "From the shim's budget lines: device allocations and VMM mappings (used), plus the managed memory "
              "the shim prefetched to the device (used + resident), against the budget (dashed).";
    for (const TraceFile& f : set.files) {
      std::map<int32_t, std::vector<const BudgetEvent*>> per_device;
      for (const BudgetEvent& e : f.budgets) per_device[e.device].push_back(&e);
      for (const auto& [device, list] : per_device) {
        std::vector<std::pair<double, double>> used, on_device, limit;
        for (const BudgetEvent* e : list) {
          double x = in_units(e->t, axis);
          used.push_back({x, gb(e->used)});
          on_device.push_back({x, gb(e->used + e->resident)});
          limit.push_back({x, gb(e->limit)});
        }
        const char* colour = kPalette[color++ % 8];
        add("used + resident, " + prefix(f, device), PlotSeries::Style::kStep, colour, on_device);
        add("used, " + prefix(f, device), PlotSeries::Style::kStep, kPalette[color++ % 8], used);
        add("budget, " + prefix(f, device), PlotSeries::Style::kDashedStep, colour, limit);
      }
    }
  } else {
    caption = "The trace has no budget lines: device allocations (kind device or vmm) from its alloc and free "
              "lines, against the header's budget or the device's size (dashed).";
    for (const TraceFile& f : set.files) {
      struct Change {
        int64_t t;
        int32_t device;
        int64_t delta;
      };
      std::vector<Change> changes;
      std::map<uint64_t, std::pair<int32_t, int64_t>> live;  // ptr -> device, bytes
      size_t ai = 0, fi = 0;
      while (ai < f.allocs.size() || fi < f.frees.size()) {
        bool take_free = fi < f.frees.size() && (ai >= f.allocs.size() || f.frees[fi].t <= f.allocs[ai].t);
        if (take_free) {
          const FreeEvent& e = f.frees[fi++];
          auto it = live.find(e.ptr);
          if (it == live.end()) continue;
          changes.push_back({e.t, it->second.first, -it->second.second});
          live.erase(it);
        } else {
          const AllocEvent& e = f.allocs[ai++];
          bool on_device = e.kind == k.device || e.kind == k.vmm;
          if (!on_device) continue;
          live[e.ptr] = {e.device, static_cast<int64_t>(e.bytes)};
          changes.push_back({e.t, e.device, static_cast<int64_t>(e.bytes)});
        }
      }
      std::map<int32_t, std::vector<std::pair<double, double>>> per_device;
      std::map<int32_t, int64_t> level;
      for (const Change& ch : changes) {
        level[ch.device] += ch.delta;
        per_device[ch.device].push_back({in_units(ch.t, axis), gb(level[ch.device])});
      }
      for (auto& [device, pts] : per_device) {
        const char* colour = kPalette[color++ % 8];
        pts.insert(pts.begin(), {0, 0});
        add("allocated, " + prefix(f, device), PlotSeries::Style::kStep, colour, pts);
        for (const DeviceInfo& d : f.devices) {
          if (d.index != device) continue;
          int64_t cap = d.budget_bytes > 0 ? d.budget_bytes : d.total_bytes;
          if (cap > 0) add(std::string(d.budget_bytes > 0 ? "budget, " : "device size, ") + prefix(f, device),
                           PlotSeries::Style::kDashedStep, colour, {{0, gb(cap)}});
        }
      }
    }
  }
  c.y_max = max_y > 0 ? max_y * 1.1 : 1;
  c.empty_message = "no budget lines and no device allocations in the trace";
  return {render_svg(c), caption};
}

Plot fault_plot(const TraceSet& set, const Report& r) {
  const KnownIds& k = set.ids;
  TimeAxis axis = time_axis(set.span_ns);
  // The address axis is made of bands, one per busy region (a linear axis over a 64-bit address
  // space would squeeze every region into one line); inside a band, the offset in the region.
  constexpr size_t kMaxBands = 12;
  struct Band {
    size_t file;
    uint64_t ptr, bytes;
    int64_t from, to;  // live time
  };
  std::vector<Band> bands;
  XYChart c;
  for (const RegionRow& g : r.regions) {
    if (bands.size() == kMaxBands) break;
    if (sat_sum(g.um.gpu_faults, g.um.cpu_faults) == 0 && g.um.migrated() == 0) continue;
    bands.push_back({g.file, g.ptr, std::max<uint64_t>(g.bytes, 1), g.alloc_t, g.free_t < 0 ? INT64_MAX : g.free_t});
    std::string label = hex_address(g.ptr) + " " + ellipsize(g.site, 20) + " (" + human_bytes(g.bytes) + ")";
    if (set.files.size() > 1) label = set.files[g.file].who() + " " + label;
    c.y_labels.push_back({static_cast<double>(bands.size() - 1) + 0.5, label});
  }
  // The rest: every other address, linear over its own range.
  uint64_t other_lo = UINT64_MAX, other_hi = 0;
  auto band_of = [&](size_t file, const UmEvent& e) -> int {
    for (size_t i = 0; i < bands.size(); ++i) {
      const Band& b = bands[i];
      if (b.file == file && e.address >= b.ptr && e.address - b.ptr < b.bytes && e.t >= b.from && e.t < b.to)
        return static_cast<int>(i);
    }
    return -1;
  };
  auto shown = [&](const UmEvent& e) {
    return e.counter == k.gpu_fault || e.counter == k.cpu_fault || e.counter == k.htod || e.counter == k.dtoh ||
           e.counter == k.thrashing;
  };
  for (size_t fi = 0; fi < set.files.size(); ++fi) {
    for (const UmEvent& e : set.files[fi].um) {
      if (shown(e) && band_of(fi, e) < 0) other_lo = std::min(other_lo, e.address), other_hi = std::max(other_hi, e.address);
    }
  }
  const bool has_other = other_lo <= other_hi;
  if (has_other) c.y_labels.push_back({static_cast<double>(bands.size()) + 0.5, "other addresses"});
  for (size_t i = 1; i < bands.size() + (has_other ? 1 : 0); ++i) c.y_bands.push_back(static_cast<double>(i));

  struct Kind {
    uint32_t counter;
    const char* label;
    const char* color;
    double radius;
  };
  // Migrations first, so that the faults that caused them are drawn on top.
  const Kind kinds[] = {{k.htod, "migrations host to device", "#009E73", 2},
                        {k.dtoh, "migrations device to host", "#E69F00", 2},
                        {k.gpu_fault, "GPU page faults", "#D55E00", 3},
                        {k.cpu_fault, "CPU page faults", "#0072B2", 3},
                        {k.thrashing, "thrashing", "#000000", 4}};
  std::vector<PlotSeries> series(std::size(kinds));
  for (size_t i = 0; i < std::size(kinds); ++i) {
    series[i].label = kinds[i].label;
    series[i].color = kinds[i].color;
    series[i].style = PlotSeries::Style::kDots;
    series[i].radius = kinds[i].radius;
  }
  for (size_t fi = 0; fi < set.files.size(); ++fi) {
    for (const UmEvent& e : set.files[fi].um) {
      size_t which = std::size(kinds);
      for (size_t i = 0; i < std::size(kinds); ++i)
        if (kinds[i].counter == e.counter) which = i;
      if (which == std::size(kinds)) continue;
      int band = band_of(fi, e);
      double y;
      if (band >= 0) {
        const Band& b = bands[static_cast<size_t>(band)];
        y = band + 0.05 + 0.9 * static_cast<double>(e.address - b.ptr) / static_cast<double>(b.bytes);
      } else {
        double range = static_cast<double>(other_hi - other_lo);
        y = static_cast<double>(bands.size()) + 0.05 + (range > 0 ? 0.9 * static_cast<double>(e.address - other_lo) / range : 0.45);
      }
      series[which].points.push_back({in_units(e.t, axis), y});
    }
  }
  size_t sampled = 1;
  for (PlotSeries& s : series) {
    if (s.points.empty()) continue;
    sampled = std::max(sampled, thin(s.points, 5000));
    c.series.push_back(std::move(s));
  }
  c.id = "plot-faults";
  c.title = "Page faults and migrations over address and time";
  c.x_label = axis.label;
  c.y_label = "address (a band per region)";
  c.x_max = in_units(set.span_ns, axis);
  c.y_max = static_cast<double>(bands.size() + (has_other ? 1 : 0));
  if (c.y_max == 0) c.y_max = 1;
  c.empty_message = "no unified-memory records in the trace";
  Plot p;
  p.svg = render_svg(c);
  p.caption = "Each dot is one CUPTI record at its start time; a band is a region (the busiest " +
              std::to_string(kMaxBands) + " at most), the dot's height in it the record's offset in the region.";
  bool any_faults = false;
  for (const TraceFile& f : set.files) any_faults = any_faults || f.faults;
  if (!any_faults) p.caption += " Fault records were not asked for (GPUMEMSHIM_TRACE_FAULTS=1): migrations only.";
  if (sampled > 1) p.caption += " Long series are sampled: one record in " + std::to_string(sampled) + " at most.";
  return p;
}

Plot copies_plot(const Report& r) {
  BarChart c;
  c.id = "plot-copies";
  c.title = "Explicit copies by kind";
  c.x_label = "bytes copied (GB)";
  for (const CopyKindRow& k : r.copies.kinds) {
    Bar b;
    b.label = k.kind;
    b.value = static_cast<double>(k.bytes) / 1e9;
    b.text = human_bytes(k.bytes) + " in " + human_count(k.count) + ", " + human_rate(k.bytes, k.ns);
    if (k.peak_gbps > 0 && k.ns > 0) b.text += " (" + percent(k.gbps / k.peak_gbps) + " of " + human_gbps(k.peak_gbps) + ")";
    b.color = k.host_kind == "pageable" ? "#D55E00" : k.host_kind == "pinned" ? "#0072B2"
              : k.host_kind == "managed" ? "#009E73" : "#777777";
    c.bars.push_back(std::move(b));
  }
  c.empty_message = "no explicit copies in the trace";
  Plot p;
  p.svg = render_svg(c);
  p.caption = "Bar length: bytes; after each bar, the achieved bandwidth (bytes over summed copy time) and its share "
              "of the link's practical peak. Pageable copies in vermillion, pinned in blue.";
  return p;
}

}  // namespace gms::report
