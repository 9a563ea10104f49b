#include "report/trace_reader.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>

#include "report/json_parse.h"

namespace gms::report {
namespace {

// Thrown inside this file only: a line the reader cannot use. Caught in read_trace_file.
struct LineError {
  std::string message;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// The keys each known line type may carry; anything else is counted as unknown (newer writers may
// add keys, and the reader must keep working).
using KeyList = std::initializer_list<std::string_view>;

// Past these a unified-memory record is a data error: one migration record moves at most a few
// MiB in practice (a 2 MiB block, a prefetch's range), and a GPU fault record counts the faults of
// one group on one page.
constexpr uint64_t kMaxMigrationBytes = 1ull << 40;
constexpr int64_t kMaxFaultGroups = 1 << 20;

class LineReader {
 public:
  LineReader(TraceSet& set, TraceFile& file) : set_(set), file_(file) {}

  void set_line(JsonRef obj, std::string_view type, int64_t line) {
    obj_ = obj;
    type_ = type;
    line_ = line;
  }

  int64_t line() const { return line_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw LineError{file_.path + ":" + std::to_string(line_) + ": " + what};
  }

  void count_unknown_keys(KeyList known) {
    for (JsonRef m = obj_.first(); m.valid(); m = m.next()) {
      bool found = false;
      for (std::string_view k : known) found = found || k == m.key();
      if (!found) ++file_.unknown_keys;
    }
  }

  // Integer member; absent (or null) gives `fallback`, or an error when `required`.
  int64_t integer(std::string_view key, bool required = false, int64_t fallback = 0) const {
    JsonRef v = obj_.get(key);
    if (!v.valid() || v.is(JsonType::kNull)) {
      if (required) fail(std::string("a \"") + std::string(type_) + "\" line needs \"" + std::string(key) + "\"");
      return fallback;
    }
    if (v.is_int()) return v.as_int();
    if (v.is(JsonType::kNumber)) {
      // 1e26 and 18446744073709551615 are whole numbers too large, 1.5 is not whole: say which.
      double d = v.as_double();
      if (d == std::floor(d) && std::fabs(d) < 9007199254740992.0) return static_cast<int64_t>(d);
      if (d == std::floor(d) || std::isinf(d))
        fail(quote(key) + " is out of range in a \"" + std::string(type_) +
             "\" line (integers in a trace lie between -2^63 and 2^63-1)");
    }
    fail(quote(key) + " must be an integer in a \"" + std::string(type_) + "\" line");
  }

  uint64_t size(std::string_view key) const {
    int64_t v = integer(key);
    if (v < 0) fail(quote(key) + " must not be negative in a \"" + std::string(type_) + "\" line");
    return static_cast<uint64_t>(v);
  }

  // Addresses are "0x..." strings (JSON numbers lose precision above 2^53); integers are accepted.
  uint64_t address(std::string_view key) const {
    JsonRef v = obj_.get(key);
    if (!v.valid() || v.is(JsonType::kNull)) return 0;
    if (v.is_int()) return static_cast<uint64_t>(v.as_int());
    if (!v.is(JsonType::kString)) fail(quote(key) + " must be an address string \"0x...\"");
    std::string_view s = v.as_string();
    uint64_t out = 0;
    if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) fail(quote(key) + " must be an address string \"0x...\"");
    auto [p, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), out, 16);
    if (ec != std::errc() || p != s.data() + s.size()) fail(quote(key) + " must be an address string \"0x...\"");
    return out;
  }

  // Interned string member; absent or null gives id 0.
  uint32_t str(std::string_view key) const {
    JsonRef v = obj_.get(key);
    if (!v.valid() || v.is(JsonType::kNull)) return 0;
    if (!v.is(JsonType::kString)) fail(quote(key) + " must be a string in a \"" + std::string(type_) + "\" line");
    return set_.strings.intern(v.as_string());
  }

  // Site ids may be written as numbers or strings; both become the same interned text.
  uint32_t site_id(std::string_view key) const {
    JsonRef v = obj_.get(key);
    if (!v.valid() || v.is(JsonType::kNull)) return 0;
    if (v.is_int()) return set_.strings.intern(std::to_string(v.as_int()));
    if (v.is(JsonType::kString)) return set_.strings.intern(v.as_string());
    fail(quote(key) + " must be a site id (integer or string)");
  }

  // Times (and durations) within +-2^61 ns (73 years) of the trace's start, so that spans fit in
  // int64 even after align.cc shifts them.
  int64_t time_value(std::string_view key, bool required, int64_t fallback) const {
    int64_t t = integer(key, required, fallback);
    if (t > kMaxTime || t < -kMaxTime)
      fail(quote(key) + " is out of range in a \"" + std::string(type_) + "\" line (a time in ns within +-2^61)");
    return t;
  }
  int64_t time() const { return time_value("t", true, 0); }
  int64_t end_time(int64_t t) const {
    int64_t e = time_value("end", false, t);
    return e < t ? t : e;  // a record that ends before it starts is taken as instantaneous
  }
  int32_t device() const { return static_cast<int32_t>(integer("device", false, -1)); }

  void triple(std::string_view key, int32_t out[3]) const {
    out[0] = out[1] = out[2] = 0;
    JsonRef v = obj_.get(key);
    if (!v.valid() || v.is(JsonType::kNull)) return;
    if (!v.is(JsonType::kArray)) fail(quote(key) + " must be an array of three integers");
    int i = 0;
    for (JsonRef e = v.first(); e.valid() && i < 3; e = e.next(), ++i) {
      if (!e.is_int()) fail(quote(key) + " must be an array of three integers");
      out[i] = static_cast<int32_t>(e.as_int());
    }
  }

  JsonRef obj() const { return obj_; }

 private:
  static constexpr int64_t kMaxTime = int64_t{1} << 61;
  static std::string quote(std::string_view key) { return "\"" + std::string(key) + "\""; }

  TraceSet& set_;
  TraceFile& file_;
  JsonRef obj_;
  std::string_view type_;
  int64_t line_ = 0;
};

std::string owned(JsonRef v) { return std::string(v.string_or()); }

// Lines out of fixed-size blocks, each line at most kMaxTraceLine long: memory is bounded by that,
// not by the longest line of a hostile or broken file.
class LineSource {
 public:
  explicit LineSource(std::FILE* in) : in_(in) {}
  enum class Got { line, end, too_long };
  // The next line, its '\n' included when there was one.
  Got next(std::string* line) {
    line->clear();
    for (;;) {
      if (pos_ == len_) {
        len_ = std::fread(block_, 1, sizeof(block_), in_);
        pos_ = 0;
        if (len_ == 0) return line->empty() ? Got::end : Got::line;
      }
      const char* start = block_ + pos_;
      const void* nl = std::memchr(start, '\n', len_ - pos_);
      size_t take = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) + 1 : len_ - pos_;
      if (line->size() + take > kMaxTraceLine) return Got::too_long;
      line->append(start, take);
      pos_ += take;
      if (nl) return Got::line;
    }
  }

 private:
  std::FILE* in_;
  char block_[64 * 1024];
  size_t pos_ = 0, len_ = 0;
};

void read_header(LineReader& r, TraceFile& f) {
  JsonRef h = r.obj();
  JsonRef version = h.get("version");
  if (!version.is_int()) r.fail("the header has no integer \"version\"");
  f.version = version.as_int();
  if (f.version > kTraceVersion) {
    // Not a line error: the file may be perfectly good, this reader is too old for it.
    throw LineError{f.path + ": trace format version " + std::to_string(f.version) +
                    " is newer than this gpumemshim reads (version " + std::to_string(kTraceVersion) +
                    "): use a newer gpumemshim report"};
  }
  if (f.version < 1) r.fail("the header's \"version\" must be 1 or more");
  r.count_unknown_keys({"type", "format", "version", "host", "pid", "rank", "local_rank", "argv", "t0_ns",
                        "wall_t0", "driver_version", "cuda_version", "policy", "devices", "cupti", "faults",
                        // Written by the shim beyond FORMAT.md's list; known, so not counted as unknown.
                        "shim_version", "passthrough", "sites_min_bytes", "cupti_version", "cupti_missing"});
  f.host = owned(h.get("host"));
  f.pid = r.integer("pid");
  f.rank = r.integer("rank", false, -1);
  f.local_rank = r.integer("local_rank", false, -1);
  for (JsonRef a = h.get("argv").first(); a.valid(); a = a.next()) f.argv.push_back(owned(a));
  f.t0_ns = r.integer("t0_ns");
  f.wall_t0 = owned(h.get("wall_t0"));
  f.driver_version = r.integer("driver_version");
  f.cuda_version = r.integer("cuda_version");
  f.policy = owned(h.get("policy"));
  f.cupti = owned(h.get("cupti"));
  f.faults = h.get("faults").is(JsonType::kBool) && h.get("faults").as_bool();
  JsonRef devices = h.get("devices");
  if (devices.valid() && !devices.is(JsonType::kArray)) r.fail("the header's \"devices\" must be an array");
  for (JsonRef d = devices.first(); d.valid(); d = d.next()) {
    if (!d.is(JsonType::kObject)) r.fail("each of the header's \"devices\" must be an object");
    auto num = [&](const char* k) { return d.get(k).is_int() ? d.get(k).as_int() : 0; };
    DeviceInfo info;
    info.index = num("index");
    info.name = owned(d.get("name"));
    info.total_bytes = num("total_bytes");
    info.budget_bytes = num("budget_bytes");
    info.pcie_gen = num("pcie_gen");
    info.pcie_width = num("pcie_width");
    f.devices.push_back(std::move(info));
  }
}

void read_site(LineReader& r, TraceFile& f) {
  r.count_unknown_keys({"type", "t", "id", "frames"});
  uint32_t id = r.site_id("id");
  JsonRef frames = r.obj().get("frames");
  if (frames.valid() && !frames.is(JsonType::kArray)) r.fail("a \"site\" line's \"frames\" must be an array");
  std::vector<SiteFrame> out;
  for (JsonRef fr = frames.first(); fr.valid(); fr = fr.next()) {
    if (!fr.is(JsonType::kObject)) r.fail("each of a \"site\" line's \"frames\" must be an object");
    out.push_back({owned(fr.get("module")), owned(fr.get("offset")), owned(fr.get("symbol"))});
  }
  f.sites[id] = std::move(out);
}

// Returns false for an unknown type (counted, not an error).
bool read_event(LineReader& r, std::string_view type, TraceSet& set, TraceFile& f) {
  if (type == "um") {
    r.count_unknown_keys({"type", "t", "end", "counter", "address", "bytes", "value", "cause", "access", "device"});
    UmEvent e{};
    e.t = r.time();
    e.end = r.end_time(e.t);
    e.counter = r.str("counter");
    e.address = r.address("address");
    e.bytes = r.size("bytes");
    e.value = r.integer("value");
    e.cause = r.str("cause");
    e.access = r.str("access");
    e.device = r.device();
    // A record no driver can make (a GPU fault record counting more faults than a group can
    // hold, a migration of more than a machine's memory) is left out and said, never counted. A
    // CPU fault's value is the faulting instruction's address: any value is possible there.
    const KnownIds& k = set.ids;
    const bool migration = e.counter == k.htod || e.counter == k.dtoh || e.counter == k.dtod;
    const char* why = migration && e.bytes > kMaxMigrationBytes                               ? "bytes"
                      : e.counter == k.gpu_fault && (e.value < 0 || e.value > kMaxFaultGroups) ? "value"
                                                                                               : nullptr;
    if (why) {
      if (f.um_impossible++ == 0) {
        f.um_impossible_example = "line " + std::to_string(r.line()) + ": a " + set.strings.str(e.counter) + " record with " +
                                  why + " " + std::to_string(why[0] == 'b' ? static_cast<int64_t>(e.bytes) : e.value);
      }
    } else {
      f.um.push_back(e);
    }
  } else if (type == "kernel") {
    r.count_unknown_keys({"type", "t", "end", "name", "device", "stream", "correlation", "grid", "block"});
    KernelEvent e{};
    e.t = r.time();
    e.end = r.end_time(e.t);
    e.name = r.str("name");
    e.device = r.device();
    e.stream = r.integer("stream");
    e.correlation = r.integer("correlation");
    r.triple("grid", e.grid);
    r.triple("block", e.block);
    f.kernels.push_back(e);
  } else if (type == "alloc") {
    r.count_unknown_keys({"type", "t", "ptr", "bytes", "device", "api", "kind", "placement", "site"});
    AllocEvent e{};
    e.t = r.time();
    e.ptr = r.address("ptr");
    e.bytes = r.size("bytes");
    e.device = r.device();
    e.api = r.str("api");
    e.kind = r.str("kind");
    e.placement = r.str("placement");
    e.site = r.site_id("site");
    f.allocs.push_back(e);
  } else if (type == "free") {
    r.count_unknown_keys({"type", "t", "ptr", "bytes", "api"});
    FreeEvent e{};
    e.t = r.time();
    e.ptr = r.address("ptr");
    e.bytes = r.size("bytes");
    e.api = r.str("api");
    f.frees.push_back(e);
  } else if (type == "copy") {
    r.count_unknown_keys({"type", "t", "api", "bytes", "dir", "host_kind", "path", "dur_ns", "site"});
    CopyEvent e{};
    e.t = r.time();
    e.dur = r.time_value("dur_ns", false, 0);
    if (e.dur < 0) e.dur = 0;
    e.bytes = r.size("bytes");
    e.api = r.str("api");
    e.dir = r.str("dir");
    e.host_kind = r.str("host_kind");
    e.path = r.str("path");
    e.site = r.site_id("site");
    f.copies.push_back(e);
  } else if (type == "memcpy") {
    r.count_unknown_keys({"type", "t", "end", "bytes", "copy_kind", "src_kind", "dst_kind", "device", "stream",
                          "correlation"});
    MemcpyEvent e{};
    e.t = r.time();
    e.end = r.end_time(e.t);
    e.bytes = r.size("bytes");
    e.copy_kind = r.str("copy_kind");
    e.src_kind = r.str("src_kind");
    e.dst_kind = r.str("dst_kind");
    e.device = r.device();
    e.stream = r.integer("stream");
    f.memcpys.push_back(e);
  } else if (type == "memset") {
    r.count_unknown_keys({"type", "t", "end", "bytes", "device", "stream"});
    MemsetEvent e{};
    e.t = r.time();
    e.end = r.end_time(e.t);
    e.bytes = r.size("bytes");
    e.device = r.device();
    e.stream = r.integer("stream");
    f.memsets.push_back(e);
  } else if (type == "launch") {
    r.count_unknown_keys({"type", "t", "seq", "stream", "fn", "regions", "part"});
    const uint64_t seq = r.size("seq");
    const bool part = r.integer("part") != 0;
    if (part && (f.launches.empty() || f.launches.back().seq != seq)) r.fail("a \"launch\" part with no launch before it");
    if (!part) {
      f.launches.push_back({r.time(), seq, r.address("stream"), r.address("fn"),
                            static_cast<uint32_t>(f.launch_regions.size()), 0});
    }
    JsonRef regions = r.obj().get("regions");
    if (regions.valid() && !regions.is(JsonType::kArray)) r.fail("a \"launch\" line's \"regions\" must be an array");
    for (JsonRef x = regions.first(); x.valid(); x = x.next()) {
      uint64_t a = 0;
      std::string_view s = x.string_or();
      if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') ||
          std::from_chars(s.data() + 2, s.data() + s.size(), a, 16).ptr != s.data() + s.size()) {
        r.fail("a \"launch\" line's \"regions\" must be address strings \"0x...\"");
      }
      f.launch_regions.push_back(a);
      ++f.launches.back().regions;
    }
  } else if (type == "pages") {
    r.count_unknown_keys({"type", "t", "ptr", "to_gpu", "to_cpu", "cpu", "at"});
    PagesEvent e{};
    e.t = r.time();
    e.ptr = r.address("ptr");
    e.to_gpu = r.size("to_gpu");
    e.to_cpu = r.size("to_cpu");
    e.cpu = r.size("cpu");
    e.at = r.str("at");
    f.pages.push_back(e);
  } else if (type == "census") {
    r.count_unknown_keys({"type", "t", "state", "why"});
    f.census_state = r.str("state");
    f.census_why = r.str("why");
  } else if (type == "range") {
    r.count_unknown_keys({"type", "t", "end", "name", "domain", "tid"});
    RangeEvent e{};
    e.t = r.time();
    e.end = r.end_time(e.t);
    e.name = r.str("name");
    e.domain = r.str("domain");
    e.tid = r.integer("tid");
    f.ranges.push_back(e);
  } else if (type == "decision") {
    r.count_unknown_keys({"type", "t", "what", "ptr", "bytes", "device", "reason"});
    DecisionEvent e{};
    e.t = r.time();
    e.what = r.str("what");
    e.ptr = r.address("ptr");
    e.bytes = r.size("bytes");
    e.device = r.device();
    e.reason = r.str("reason");
    f.decisions.push_back(e);
  } else if (type == "budget") {
    r.count_unknown_keys({"type", "t", "device", "limit", "used", "resident"});
    BudgetEvent e{};
    e.t = r.time();
    e.device = r.device();
    e.limit = r.integer("limit");
    e.used = r.integer("used");
    e.resident = r.integer("resident");
    f.budgets.push_back(e);
  } else if (type == "register" || type == "unregister") {
    bool un = type == "unregister";
    if (un) r.count_unknown_keys({"type", "t", "ptr", "bytes", "dur_ns", "why"});
    else r.count_unknown_keys({"type", "t", "ptr", "bytes", "dur_ns", "result", "why"});
    RegisterEvent e{};
    e.t = r.time();
    e.dur = r.time_value("dur_ns", false, 0);
    if (e.dur < 0) e.dur = 0;
    e.ptr = r.address("ptr");
    e.bytes = r.size("bytes");
    e.result = un ? 0 : r.str("result");
    e.why = r.str("why");
    e.unregister = un;
    f.registrations.push_back(e);
  } else if (type == "cache") {
    r.count_unknown_keys({"type", "t", "hits", "misses", "evictions", "invalidations", "bytes"});
    // Totals so far: the last line holds the run's totals.
    f.cache = {r.integer("hits"), r.integer("misses"), r.integer("evictions"), r.integer("invalidations"),
               r.integer("bytes"), true};
  } else if (type == "site") {
    read_site(r, f);
  } else if (type == "dropped") {
    r.count_unknown_keys({"type", "t", "records", "source"});
    int64_t n = r.integer("records");
    uint32_t source = r.str("source");
    if (set.strings.str(source) == "shim") f.dropped_shim += n;
    else if (set.strings.str(source) == "cupti") f.dropped_cupti += n;
    else f.dropped_other += n;
  } else if (type == "end") {
    r.count_unknown_keys({"type", "t", "events", "dropped"});
    f.ended = true;
    f.end_events = r.integer("events");
    f.end_dropped = r.integer("dropped");
  } else {
    return false;
  }
  return true;
}

void strip_line_end(std::string_view* s) {
  while (!s->empty() && (s->back() == '\n' || s->back() == '\r')) s->remove_suffix(1);
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

bool read_trace_file(const std::string& path, TraceSet& set, std::string* error) {
  if (path == "-") return read_trace_stream(stdin, "(standard input)", set, error);
  std::unique_ptr<std::FILE, FileCloser> in(std::fopen(path.c_str(), "rb"));
  if (!in) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  return read_trace_stream(in.get(), path, set, error);
}

bool read_trace_stream(std::FILE* in, const std::string& path, TraceSet& set, std::string* error) {
  set.files.emplace_back();
  TraceFile& f = set.files.back();
  f.path = path;
  LineReader reader(set, f);
  JsonDoc doc;
  JsonError json_error;
  LineSource source(in);
  std::string buffer;
  int64_t line_no = 0;
  bool have_header = false;
  try {
    for (;;) {
      LineSource::Got got = source.next(&buffer);
      if (got == LineSource::Got::end) break;
      ++line_no;
      if (got == LineSource::Got::too_long)
        throw LineError{path + ":" + std::to_string(line_no) + ": a line longer than " +
                        std::to_string(kMaxTraceLine >> 20) + " MiB: not a gpumemshim trace line"};
      std::string_view line(buffer);
      bool complete = !line.empty() && line.back() == '\n';
      strip_line_end(&line);
      if (!have_header) {
        std::string not_trace = path + ":" + std::to_string(line_no) +
                                ": not a gpumemshim trace: the first line must be its header "
                                "{\"type\": \"header\", \"format\": \"gpumemshim-trace\", \"version\": N, ...}";
        if (!doc.parse(line, &json_error)) throw LineError{not_trace + " (it is not even JSON)"};
        JsonRef h = doc.root();
        if (!h.is(JsonType::kObject) || h.get("type").string_or() != "header" ||
            h.get("format").string_or() != "gpumemshim-trace") {
          // Say what was found: an event line means the file lost its beginning.
          std::string_view found = h.get("type").string_or();
          if (!found.empty() && found != "header")
            throw LineError{not_trace + "; found a line of type \"" + std::string(found) +
                            "\" (was the beginning of the file lost?)"};
          throw LineError{not_trace};
        }
        reader.set_line(h, "header", line_no);
        read_header(reader, f);
        have_header = true;
        continue;
      }
      if (blank(line)) continue;
      if (!doc.parse(line, &json_error)) {
        if (!complete && !f.ended) {
          // The writer was stopped in the middle of a line: what came before is good.
          set.warnings.push_back(path + ":" + std::to_string(line_no) + ": the last line is cut off; ignored");
          break;
        }
        throw LineError{path + ":" + std::to_string(line_no) + ": not valid JSON: " + json_error.message +
                        " (column " + std::to_string(json_error.column) + ")"};
      }
      JsonRef obj = doc.root();
      if (!obj.is(JsonType::kObject)) throw LineError{path + ":" + std::to_string(line_no) + ": a trace line must be a JSON object"};
      JsonRef type = obj.get("type");
      if (!type.is(JsonType::kString))
        throw LineError{path + ":" + std::to_string(line_no) + ": a trace line needs a string \"type\""};
      std::string_view type_name = type.as_string();
      reader.set_line(obj, type_name, line_no);
      if (type_name == "header")
        reader.fail("a second header: one file holds one process's trace (pass each file separately)");
      if (!read_event(reader, type_name, set, f)) ++f.unknown_types[std::string(type_name)];
    }
  } catch (const LineError& e) {
    *error = e.message;
    return false;
  }
  if (std::ferror(in)) {
    *error = path + ": read error: " + std::strerror(errno);
    return false;
  }
  f.lines = line_no;
  if (!have_header) {
    *error = path + ": empty file, not a gpumemshim trace";
    return false;
  }
  if (f.um_impossible > 0) {
    set.warnings.push_back(path + ": " + std::to_string(f.um_impossible) +
                           " unified-memory records with impossible values left out of every count (" +
                           f.um_impossible_example + "): a data error of the driver or the profiler");
  }
  if (!f.ended)
    set.warnings.push_back(path + ": trace ends early (the program was killed?): no \"end\" line after line " +
                           std::to_string(line_no) + "; reporting what is there");
  return true;
}

}  // namespace gms::report
