// `--perfetto OUT.json`: the Chrome trace event format, which ui.perfetto.dev and chrome://tracing
// open. One process per trace file (pid: the process, named by rank), one thread per track: kernels,
// copies and memsets per device stream; migrations on a "unified memory" track per device; faults
// and other unified-memory records as instant events; the shim's decisions as instant events; NVTX
// ranges per thread; budget use as a counter per device.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>

#include "report/demangle.h"
#include "report/json_write.h"
#include "report/render.h"
#include "report/units.h"

namespace gms::report {
namespace {

// Complete events ("X") on one thread must nest; overlapping ones (concurrent migrations, start/end
// NVTX ranges) go to extra lanes of the track ("#2", "#3") instead of being mis-drawn.
class Lanes {
 public:
  size_t place(int64_t start, int64_t end) {
    for (size_t i = 0; i < lanes_.size(); ++i) {
      std::vector<int64_t>& open = lanes_[i];  // end times of the events open on this lane
      while (!open.empty() && open.back() <= start) open.pop_back();
      if (open.empty() || open.back() >= end) {
        open.push_back(end);
        return i;
      }
    }
    lanes_.push_back({end});
    return lanes_.size() - 1;
  }

 private:
  std::vector<std::vector<int64_t>> lanes_;
};

class PerfettoWriter {
 public:
  PerfettoWriter(const TraceSet& set, std::FILE* out) : set_(set), w_(out, false) {}

  bool write() {
    w_.begin_object();
    w_.key("displayTimeUnit"), w_.value("ms");
    w_.key("otherData");
    w_.begin_object();
    w_.key("generator"), w_.value("gpumemshim report");
    w_.key("traces");
    w_.begin_array();
    for (const TraceFile& f : set_.files) w_.value(f.path);
    w_.end_array();
    w_.end_object();
    w_.key("traceEvents");
    w_.begin_array();
    assign_pids();
    for (size_t i = 0; i < set_.files.size(); ++i) write_file(i);
    w_.newline_before_next();
    w_.end_array();
    w_.end_object();
    return w_.flush();
  }

 private:
  void assign_pids() {
    // Two hosts may reuse a pid: such a file gets a pid of its own above any real one.
    std::set<int64_t> used;
    int64_t spare = 1 << 22;
    for (const TraceFile& f : set_.files) {
      int64_t pid = f.pid;
      if (!used.insert(pid).second) {
        while (used.count(++spare)) {
        }
        pid = spare;
        used.insert(pid);
      }
      pids_.push_back(pid);
    }
  }

  static void micros(std::string& out, int64_t ns) {
    // Exact: the integer part and three decimals, never a rounded double.
    char text[40];
    int64_t a = ns < 0 ? -ns : ns;
    std::snprintf(text, sizeof text, "%s%" PRId64 ".%03" PRId64, ns < 0 ? "-" : "", a / 1000, a % 1000);
    out = text;
  }

  void begin_event(const char* ph, std::string_view name, std::string_view cat, int tid, int64_t t) {
    w_.newline_before_next();
    w_.begin_object();
    w_.key("ph"), w_.value(ph);
    w_.key("name"), w_.value(name);
    if (!cat.empty()) w_.key("cat"), w_.value(cat);
    w_.key("pid"), w_.value(pid_);
    w_.key("tid"), w_.value(static_cast<int64_t>(tid));
    micros(num_, t);
    w_.key("ts"), w_.raw_number(num_);
  }

  void duration(int64_t ns) {
    micros(num_, ns < 0 ? 0 : ns);
    w_.key("dur"), w_.raw_number(num_);
  }

  void metadata(const char* name, int tid, const char* arg, std::string_view text) {
    w_.newline_before_next();
    w_.begin_object();
    w_.key("ph"), w_.value("M");
    w_.key("name"), w_.value(name);
    w_.key("pid"), w_.value(pid_);
    w_.key("tid"), w_.value(static_cast<int64_t>(tid));
    w_.key("args");
    w_.begin_object();
    w_.key(arg), w_.value(text);
    w_.end_object();
    w_.end_object();
  }

  void sort_metadata(const char* name, int tid, int64_t index) {
    w_.newline_before_next();
    w_.begin_object();
    w_.key("ph"), w_.value("M");
    w_.key("name"), w_.value(name);
    w_.key("pid"), w_.value(pid_);
    w_.key("tid"), w_.value(static_cast<int64_t>(tid));
    w_.key("args");
    w_.begin_object();
    w_.key("sort_index"), w_.value(index);
    w_.end_object();
    w_.end_object();
  }

  // The thread id of a named track of the current process, created (and named) on first use.
  int track(const std::string& name) {
    auto [it, inserted] = tracks_.emplace(name, static_cast<int>(tracks_.size()) + 1);
    if (inserted) {
      metadata("thread_name", it->second, "name", name);
      sort_metadata("thread_sort_index", it->second, it->second);
    }
    return it->second;
  }

  // A track for complete events that may overlap: lane 0 is `name`, further lanes "name #2"...
  int lane_track(const std::string& name, int64_t start, int64_t end) {
    size_t lane = lanes_[name].place(start, end);
    return track(lane == 0 ? name : name + " #" + std::to_string(lane + 1));
  }

  std::string str(uint32_t id) const { return set_.strings.str(id); }

  static std::string device_name(int32_t device) {
    return device >= 0 ? "GPU " + std::to_string(device) : std::string("GPU ?");
  }

  void write_file(size_t index) {
    const TraceFile& f = set_.files[index];
    const KnownIds& k = set_.ids;
    pid_ = pids_[index];
    tracks_.clear();
    lanes_.clear();
    std::string process = f.rank >= 0 ? "rank " + std::to_string(f.rank) + " (pid " + std::to_string(f.pid) + ")"
                                      : "pid " + std::to_string(f.pid);
    if (!f.host.empty()) process += " on " + f.host;
    metadata("process_name", 0, "name", process);
    sort_metadata("process_sort_index", 0, f.rank >= 0 ? f.rank : static_cast<int64_t>(index));

    for (const DecisionEvent& e : f.decisions) {
      begin_event("i", str(e.what) + " " + human_bytes(e.bytes), "decision", track("shim decisions"), e.t);
      w_.key("s"), w_.value("t");
      w_.key("args");
      w_.begin_object();
      w_.key("ptr"), w_.value(hex_address(e.ptr));
      w_.key("bytes"), w_.value(e.bytes);
      w_.key("device"), w_.value(static_cast<int64_t>(e.device));
      w_.key("reason"), w_.value(str(e.reason));
      w_.end_object();
      w_.end_object();
    }
    for (const RangeEvent& e : f.ranges) {
      std::string name = str(e.name);
      begin_event("X", name, "nvtx", lane_track("NVTX thread " + std::to_string(e.tid), e.t, e.end), e.t);
      duration(e.end - e.t);
      w_.key("args");
      w_.begin_object();
      w_.key("domain"), w_.value(str(e.domain));
      w_.end_object();
      w_.end_object();
    }
    for (const CopyEvent& e : f.copies) {
      std::string kind = str(e.dir) + (e.host_kind ? " " + str(e.host_kind) : "");
      begin_event("X", "copy " + kind, "copy call", lane_track("copy calls (host)", e.t, e.t + e.dur), e.t);
      duration(e.dur);
      w_.key("args");
      w_.begin_object();
      w_.key("api"), w_.value(str(e.api));
      w_.key("bytes"), w_.value(e.bytes);
      w_.key("path"), w_.value(str(e.path));
      w_.key("GB/s"), w_.value_fixed(e.dur > 0 ? static_cast<double>(e.bytes) / static_cast<double>(e.dur) : 0, 3);
      w_.end_object();
      w_.end_object();
    }
    for (const RegisterEvent& e : f.registrations) {
      begin_event("X", e.unregister ? "unregister" : "register", "registration",
                  lane_track("host registration", e.t, e.t + e.dur), e.t);
      duration(e.dur);
      w_.key("args");
      w_.begin_object();
      w_.key("ptr"), w_.value(hex_address(e.ptr));
      w_.key("bytes"), w_.value(e.bytes);
      if (!e.unregister) w_.key("result"), w_.value(str(e.result));
      w_.key("why"), w_.value(str(e.why));
      w_.end_object();
      w_.end_object();
    }
    for (const KernelEvent& e : f.kernels) {
      std::string t = device_name(e.device) + " stream " + std::to_string(e.stream);
      std::string name = str(e.name);
      std::string readable = demangle(name);
      begin_event("X", short_name(readable, 120), "kernel", lane_track(t, e.t, e.end), e.t);
      duration(e.end - e.t);
      w_.key("args");
      w_.begin_object();
      w_.key("grid");
      w_.begin_array();
      for (int32_t g : e.grid) w_.value(static_cast<int64_t>(g));
      w_.end_array();
      w_.key("block");
      w_.begin_array();
      for (int32_t b : e.block) w_.value(static_cast<int64_t>(b));
      w_.end_array();
      w_.key("correlation"), w_.value(e.correlation);
      if (readable != name) w_.key("mangled"), w_.value(name);
      w_.end_object();
      w_.end_object();
    }
    for (const MemcpyEvent& e : f.memcpys) {
      uint32_t host = e.copy_kind == k.dtoh ? e.dst_kind : e.src_kind;
      std::string name = "memcpy " + str(e.copy_kind) +
                         (e.copy_kind == k.htod || e.copy_kind == k.dtoh ? " " + str(host) : std::string());
      std::string t = device_name(e.device) + " stream " + std::to_string(e.stream);
      begin_event("X", name, "memcpy", lane_track(t, e.t, e.end), e.t);
      duration(e.end - e.t);
      w_.key("args");
      w_.begin_object();
      w_.key("bytes"), w_.value(e.bytes);
      w_.key("src_kind"), w_.value(str(e.src_kind));
      w_.key("dst_kind"), w_.value(str(e.dst_kind));
      w_.key("GB/s"), w_.value_fixed(e.end > e.t ? static_cast<double>(e.bytes) / static_cast<double>(e.end - e.t) : 0, 3);
      w_.end_object();
      w_.end_object();
    }
    for (const MemsetEvent& e : f.memsets) {
      std::string t = device_name(e.device) + " stream " + std::to_string(e.stream);
      begin_event("X", "memset", "memset", lane_track(t, e.t, e.end), e.t);
      duration(e.end - e.t);
      w_.key("args");
      w_.begin_object();
      w_.key("bytes"), w_.value(e.bytes);
      w_.end_object();
      w_.end_object();
    }
    for (const UmEvent& e : f.um) {
      bool migration = e.counter == k.htod || e.counter == k.dtoh || e.counter == k.dtod;
      if (migration) {
        begin_event("X", "migrate " + str(e.counter), "unified memory",
                    lane_track(device_name(e.device) + " unified memory", e.t, e.end), e.t);
        duration(e.end - e.t);
      } else {
        begin_event("i", str(e.counter), "unified memory", track(device_name(e.device) + " unified memory events"), e.t);
        w_.key("s"), w_.value("t");
      }
      w_.key("args");
      w_.begin_object();
      w_.key("address"), w_.value(hex_address(e.address));
      if (migration) {
        w_.key("bytes"), w_.value(e.bytes);
        w_.key("cause"), w_.value(str(e.cause));
      } else if (e.counter == k.cpu_fault) {
        w_.key("pc"), w_.value(hex_address(static_cast<uint64_t>(e.value)));  // the faulting instruction
      } else {
        w_.key("value"), w_.value(e.value);
        if (e.access) w_.key("access"), w_.value(str(e.access));
      }
      w_.end_object();
      w_.end_object();
    }
    for (const BudgetEvent& e : f.budgets) {
      begin_event("C", device_name(e.device) + " memory (bytes)", "budget", 0, e.t);
      w_.key("args");
      w_.begin_object();
      w_.key("used"), w_.value(e.used);
      w_.key("resident"), w_.value(e.resident);
      w_.key("limit"), w_.value(e.limit);
      w_.end_object();
      w_.end_object();
    }
  }

  const TraceSet& set_;
  JsonWriter w_;
  std::vector<int64_t> pids_;
  int64_t pid_ = 0;
  std::map<std::string, int> tracks_;
  std::map<std::string, Lanes> lanes_;
  std::string num_;
};

}  // namespace

bool write_perfetto(const TraceSet& set, std::FILE* out) { return PerfettoWriter(set, out).write(); }

}  // namespace gms::report
