#include "stats.h"

#include "log.h"
#include "out_file.h"

namespace gms {
namespace {

uint64_t load(const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); }

// The first write error of print_json, which returns it. The printers run once, at exit; no
// thread_local here: a preloaded library's dynamic TLS may call malloc on first use.
std::atomic<int> g_emit_error{0};

void emit(int fd, Line& l) {
  l.chr('\n');
  int err = out_file_write(fd, l.data(), l.size());
  int none = 0;
  if (err) g_emit_error.compare_exchange_strong(none, err, std::memory_order_relaxed);
  l.clear();
}

void text_row(int fd, const char* name, const Tally& c, bool with_errors) {
  if (c.calls == 0) return;
  Line l;
  l.str("  ").str(name).pad_to(24).u64(c.calls).pad_to(40);
  l.bytes(c.bytes);
  if (with_errors && c.errors != 0) l.pad_to(56).u64(c.errors).str(" failed");
  emit(fd, l);
}

void json_counter(Line& l, const char* name, const Tally& c, bool with_errors, bool last) {
  l.str("    \"").str(name).str("\": {\"calls\": ").u64(c.calls).str(", \"bytes\": ").u64(c.bytes);
  if (with_errors) l.str(", \"errors\": ").u64(c.errors);
  l.str(last ? "}" : "},");
}

}  // namespace

Tally Stats::family(Family f) const {
  Tally t = read(family_[static_cast<int>(f)]);
  if (f == Family::launch) {
    for (const auto& n : launches_) t.calls += load(n);
    t.calls += t.errors;
  }
  return t;
}

void Stats::live_add(MemKind k, uint64_t bytes) {
  int i = static_cast<int>(k);
  uint64_t now = live_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  uint64_t peak = peak_[i].load(std::memory_order_relaxed);
  while (now > peak && !peak_[i].compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void Stats::live_sub(MemKind k, uint64_t bytes) {
  int i = static_cast<int>(k);
  uint64_t cur = live_[i].load(std::memory_order_relaxed);
  // Never wrap below zero: a free of memory allocated before a fork reset is not a negative size.
  while (!live_[i].compare_exchange_weak(cur, cur >= bytes ? cur - bytes : 0, std::memory_order_relaxed)) {
  }
}

void Stats::reset() {
  for (auto& c : family_) c.calls = 0, c.bytes = 0, c.errors = 0;
  for (auto& c : direction_) c.calls = 0, c.bytes = 0, c.errors = 0;
  for (auto& c : host_kind_) c.calls = 0, c.bytes = 0, c.errors = 0;
  for (auto& c : decision_) c.calls = 0, c.bytes = 0, c.errors = 0;
  for (auto& a : launches_) a = 0;
  for (auto& a : anomalies_) a = 0;
  for (auto& a : timings_) a = 0;
  for (int i = 0; i < kMemKindCount; ++i) peak_[i] = live_[i].load();
}

void Stats::print_text(int fd) const {
  Line l;
  l.str("gpumemshim statistics");
  emit(fd, l);
  l.str("  calls by API family").pad_to(40).str("bytes");
  emit(fd, l);
#define GMS_ROW(id, doc) text_row(fd, #id, family(Family::id), true);
  GMS_FAMILIES(GMS_ROW)
#undef GMS_ROW
  l.str("  copies by direction");
  emit(fd, l);
#define GMS_ROW(id, doc) text_row(fd, #id, direction(Direction::id), false);
  GMS_DIRECTIONS(GMS_ROW)
#undef GMS_ROW
  l.str("  copies by host memory kind");
  emit(fd, l);
#define GMS_ROW(id, doc) text_row(fd, #id, host_kind(HostKind::id), false);
  GMS_HOST_KINDS(GMS_ROW)
#undef GMS_ROW
  bool any_decision = false;
  for (int i = 0; i < kDecisionCount; ++i) any_decision |= decision(static_cast<Decision>(i)).calls != 0;
  if (any_decision) {
    l.str("  placement and residency decisions");
    emit(fd, l);
#define GMS_ROW(id, doc) text_row(fd, #id, decision(Decision::id), false);
    GMS_DECISIONS(GMS_ROW)
#undef GMS_ROW
  }
  l.str("  launches");
  emit(fd, l);
#define GMS_ROW(id, doc) \
  if (launches(LaunchKind::id)) { l.str("  ").str(#id).pad_to(24).u64(launches(LaunchKind::id)); emit(fd, l); }
  GMS_LAUNCH_KINDS(GMS_ROW)
#undef GMS_ROW
  l.str("  peak live bytes by memory kind");
  emit(fd, l);
  for (int i = 0; i < kMemKindCount; ++i) {
    auto k = static_cast<MemKind>(i);
    if (peak(k) == 0) continue;
    l.str("  ").str(mem_kind_name(k)).pad_to(24).bytes(peak(k)).pad_to(40).str("live at exit ").bytes(live(k));
    emit(fd, l);
  }
#define GMS_ROW(id, doc) \
  if (timing(Timing::id)) { l.str("  time ").str(doc).pad_to(40).fixed(timing(Timing::id) / 1e6, 1).str(" ms"); emit(fd, l); }
  GMS_TIMINGS(GMS_ROW)
#undef GMS_ROW
#define GMS_ROW(id, doc) \
  if (anomalies(Anomaly::id)) { l.str("  note: ").u64(anomalies(Anomaly::id)).str(" ").str(doc); emit(fd, l); }
  GMS_ANOMALIES(GMS_ROW)
#undef GMS_ROW
}

int Stats::print_json(int fd, long pid) const {
  g_emit_error.store(0, std::memory_order_relaxed);
  Line l;
  l.str("{\"format\": \"gpumemshim-stats\", \"version\": 1, \"pid\": ").i64(pid).str(",");
  emit(fd, l);
  l.str("  \"families\": {");
  emit(fd, l);
  int n = 0;
#define GMS_ROW(id, doc) json_counter(l, #id, family(Family::id), true, ++n == kFamilyCount); emit(fd, l);
  GMS_FAMILIES(GMS_ROW)
#undef GMS_ROW
  l.str("  },");
  emit(fd, l);
  l.str("  \"copies_by_direction\": {");
  emit(fd, l);
  n = 0;
#define GMS_ROW(id, doc) json_counter(l, #id, direction(Direction::id), false, ++n == kDirectionCount); emit(fd, l);
  GMS_DIRECTIONS(GMS_ROW)
#undef GMS_ROW
  l.str("  },");
  emit(fd, l);
  l.str("  \"copies_by_host_kind\": {");
  emit(fd, l);
  n = 0;
#define GMS_ROW(id, doc) json_counter(l, #id, host_kind(HostKind::id), false, ++n == kHostKindCount); emit(fd, l);
  GMS_HOST_KINDS(GMS_ROW)
#undef GMS_ROW
  l.str("  },");
  emit(fd, l);
  l.str("  \"decisions\": {");
  emit(fd, l);
  n = 0;
#define GMS_ROW(id, doc) json_counter(l, #id, decision(Decision::id), false, ++n == kDecisionCount); emit(fd, l);
  GMS_DECISIONS(GMS_ROW)
#undef GMS_ROW
  l.str("  },");
  emit(fd, l);
  l.str("  \"launches\": {");
  n = 0;
#define GMS_ROW(id, doc) l.str("\"" #id "\": ").u64(launches(LaunchKind::id)).str(++n == kLaunchKindCount ? "" : ", ");
  GMS_LAUNCH_KINDS(GMS_ROW)
#undef GMS_ROW
  l.str("},");
  emit(fd, l);
  for (const char* what : {"peak_live_bytes", "live_bytes_at_exit"}) {
    bool peak_row = what[0] == 'p';
    l.str("  \"").str(what).str("\": {");
    for (int i = 0; i < kMemKindCount; ++i) {
      auto k = static_cast<MemKind>(i);
      l.str("\"").str(mem_kind_name(k)).str("\": ").u64(peak_row ? peak(k) : live(k));
      if (i + 1 < kMemKindCount) l.str(", ");
    }
    l.str("},");
    emit(fd, l);
  }
  l.str("  \"timings_ns\": {");
  n = 0;
#define GMS_ROW(id, doc) l.str("\"" #id "\": ").u64(timing(Timing::id)).str(++n == kTimingCount ? "" : ", ");
  GMS_TIMINGS(GMS_ROW)
#undef GMS_ROW
  l.str("},");
  emit(fd, l);
  l.str("  \"anomalies\": {");
  n = 0;
#define GMS_ROW(id, doc) l.str("\"" #id "\": ").u64(anomalies(Anomaly::id)).str(++n == kAnomalyCount ? "" : ", ");
  GMS_ANOMALIES(GMS_ROW)
#undef GMS_ROW
  l.str("}");
  emit(fd, l);
  l.str("}");
  emit(fd, l);
  return g_emit_error.load(std::memory_order_relaxed);
}

}  // namespace gms
