#include "report/align.h"

#include "report/saturate.h"

#include <algorithm>
#include <map>
#include <optional>

namespace gms::report {
namespace {

// Wall times within 9e9 s of 1970 (years 1685 to 2255): their nanoseconds fit in int64.
constexpr int64_t kMaxWallSeconds = 9'000'000'000;
// Files further apart than 2^61 ns (73 years) are not one job: offsets are capped there, so that
// shifted times (within +-2^61 in each file) stay within +-2^62 and every span fits in int64.
constexpr int64_t kMaxOffset = int64_t{1} << 61;

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool digits(std::string_view s, size_t pos, size_t n, int64_t* out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

template <class F>
void for_each_time(TraceFile& f, F shift) {
  for (auto& e : f.allocs) shift(e.t);
  for (auto& e : f.frees) shift(e.t);
  for (auto& e : f.copies) shift(e.t);
  for (auto& e : f.decisions) shift(e.t);
  for (auto& e : f.budgets) shift(e.t);
  for (auto& e : f.registrations) shift(e.t);
  for (auto& e : f.kernels) shift(e.t), shift(e.end);
  for (auto& e : f.memcpys) shift(e.t), shift(e.end);
  for (auto& e : f.memsets) shift(e.t), shift(e.end);
  for (auto& e : f.um) shift(e.t), shift(e.end);
  for (auto& e : f.ranges) shift(e.t), shift(e.end);
}

}  // namespace

bool parse_wall_time(std::string_view s, int64_t* ns) {
  int64_t y, mo, d, h, mi, sec;
  if (!digits(s, 0, 4, &y) || s.size() < 19 || s[4] != '-' || !digits(s, 5, 2, &mo) || s[7] != '-' ||
      !digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != ' ') || !digits(s, 11, 2, &h) || s[13] != ':' ||
      !digits(s, 14, 2, &mi) || s[16] != ':' || !digits(s, 17, 2, &sec))
    return false;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return false;
  size_t pos = 19;
  int64_t frac_ns = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int64_t scale = 100000000;
    size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      frac_ns += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return false;
  }
  int64_t offset_s = 0;
  if (pos < s.size() && s[pos] == 'Z') {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int64_t oh, om;
    if (!digits(s, pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, &om))
      return false;
    offset_s = (oh * 3600 + om * 60) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return false;  // a wall time without a zone cannot be compared across hosts
  }
  if (pos != s.size()) return false;
  int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset_s;
  if (secs > kMaxWallSeconds || secs < -kMaxWallSeconds) return false;  // beyond int64 nanoseconds
  *ns = secs * 1000000000 + frac_ns;
  return true;
}

void align_files(TraceSet& set) {
  // Per host: the file that started first is the host's reference.
  struct Host {
    int64_t first_t0 = 0;
    bool any = false;
    std::optional<int64_t> wall_at_first_t0;
  };
  std::map<std::string, Host> hosts;
  for (const TraceFile& f : set.files) {
    Host& h = hosts[f.host];
    if (!h.any || f.t0_ns < h.first_t0) h.first_t0 = f.t0_ns;
    h.any = true;
  }
  for (const TraceFile& f : set.files) {
    Host& h = hosts[f.host];
    int64_t wall = 0;
    if (h.wall_at_first_t0 || !parse_wall_time(f.wall_t0, &wall)) continue;
    h.wall_at_first_t0 = sat_diff(wall, sat_diff(f.t0_ns, h.first_t0));
  }
  std::optional<int64_t> earliest_wall;
  for (auto& [name, h] : hosts) {
    if (h.wall_at_first_t0 && (!earliest_wall || *h.wall_at_first_t0 < *earliest_wall)) earliest_wall = h.wall_at_first_t0;
  }
  for (TraceFile& f : set.files) {
    const Host& h = hosts[f.host];
    int64_t host_offset = 0;
    if (hosts.size() > 1) {
      if (h.wall_at_first_t0 && earliest_wall) {
        host_offset = sat_diff(*h.wall_at_first_t0, *earliest_wall);
      } else {
        set.warnings.push_back(f.path + ": no usable \"wall_t0\" in the header: its times cannot be aligned with "
                               "other hosts' and start at 0");
      }
    }
    f.offset_ns = std::clamp(sat_sum(host_offset, sat_diff(f.t0_ns, h.first_t0)), -kMaxOffset, kMaxOffset);
  }
  int64_t span = 0;
  for (TraceFile& f : set.files) {
    const int64_t offset = f.offset_ns;
    for_each_time(f, [&](int64_t& t) {
      add_to(t, offset);
      span = std::max(span, t);
    });
    for (const CopyEvent& c : f.copies) span = std::max(span, sat_sum(c.t, c.dur));
    for (const RegisterEvent& r : f.registrations) span = std::max(span, sat_sum(r.t, r.dur));
  }
  set.span_ns = span;
}

}  // namespace gms::report
