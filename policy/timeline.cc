#include "policy/timeline.h"

#include <algorithm>
#include <charconv>

namespace gms::policy {
namespace {

// The next whitespace-separated word of `line` from `pos`; empty at the end.
std::string_view word(std::string_view line, size_t& pos) {
  while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
  size_t start = pos;
  while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
  return line.substr(start, pos - start);
}

template <typename T>
bool number(std::string_view w, T* out) {
  if (w.empty()) return false;
  auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), *out);
  return ec == std::errc() && p == w.data() + w.size();
}

}  // namespace

bool StepTimeline::alive(uint32_t a, uint64_t p) const {
  const Alloc& x = allocs[a];
  if (x.persistent()) return true;
  const int64_t q = static_cast<int64_t>(p), period = static_cast<int64_t>(kernels.size());
  return (x.born <= q && q < x.died) || q < x.died - period;
}

uint64_t StepTimeline::live_bytes(uint64_t p) const {
  uint64_t n = 0;
  for (uint32_t a = 0; a < allocs.size(); ++a) {
    if (alive(a, p)) n += allocs[a].bytes;
  }
  return n;
}

uint64_t StepTimeline::peak_bytes() const {
  // Births and deaths as deltas over the positions: one pass instead of P passes over the allocations.
  const int64_t period = static_cast<int64_t>(kernels.size());
  std::vector<int64_t> delta(kernels.size() + 1, 0);
  int64_t base = 0;
  for (const Alloc& x : allocs) {
    const int64_t b = static_cast<int64_t>(x.bytes);
    if (x.persistent()) {
      base += b;
      continue;
    }
    delta[x.born] += b;
    if (x.died <= period) {
      delta[x.died] -= b;
    } else {  // wraps: alive at [born, P) and [0, died - P)
      base += b;
      delta[x.died - period] -= b;
    }
  }
  int64_t live = base, peak = 0;
  for (int64_t p = 0; p < period; ++p) {
    live += delta[p];
    peak = std::max(peak, live);
  }
  return static_cast<uint64_t>(peak);
}

uint64_t StepTimeline::kernel_ns() const {
  uint64_t n = 0;
  for (const Kernel& k : kernels) n += k.dur_ns;
  return n;
}

std::string StepTimeline::check() const {
  const int64_t period = static_cast<int64_t>(kernels.size());
  if (period == 0) return "no kernels";
  for (size_t a = 0; a < allocs.size(); ++a) {
    const Alloc& x = allocs[a];
    if (x.persistent()) continue;
    if (x.born < 0 || x.born >= period || x.died <= x.born || x.died > x.born + period) {
      return "allocation " + std::to_string(a) + ": life [" + std::to_string(x.born) + ", " + std::to_string(x.died) +
             ") is not within one step of " + std::to_string(period);
    }
  }
  for (size_t p = 0; p < kernels.size(); ++p) {
    for (uint32_t a : kernels[p].uses) {
      if (a >= allocs.size()) return "kernel " + std::to_string(p) + ": no allocation " + std::to_string(a);
      if (!alive(a, p)) return "kernel " + std::to_string(p) + " uses allocation " + std::to_string(a) + ", not alive there";
    }
  }
  return "";
}

std::string StepTimeline::format() const {
  std::string s = "timeline 1 " + std::to_string(kernels.size()) + "\n";
  for (size_t a = 0; a < allocs.size(); ++a) {
    const Alloc& x = allocs[a];
    s += "alloc " + std::to_string(a) + " " + std::to_string(x.bytes) + " ";
    s += x.persistent() ? std::string("persistent") : std::to_string(x.born) + " " + std::to_string(x.died);
    s += "\n";
  }
  for (size_t p = 0; p < kernels.size(); ++p) {
    s += "kernel " + std::to_string(p) + " " + std::to_string(kernels[p].fn) + " " + std::to_string(kernels[p].dur_ns);
    for (uint32_t a : kernels[p].uses) s += " " + std::to_string(a);
    s += "\n";
  }
  return s;
}

bool StepTimeline::parse(std::string_view text, StepTimeline* out, std::string* error) {
  StepTimeline t;
  uint64_t period = 0;
  bool header = false;
  size_t line_no = 0;
  auto fail = [&](const std::string& why) {
    *error = "line " + std::to_string(line_no) + ": " + why;
    return false;
  };
  while (!text.empty()) {
    ++line_no;
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    size_t pos = 0;
    const std::string_view kind = word(line, pos);
    if (kind.empty()) continue;
    if (!header) {
      uint32_t version = 0;
      if (kind != "timeline" || !number(word(line, pos), &version) || version != 1 || !number(word(line, pos), &period) ||
          period == 0) {
        return fail("expected 'timeline 1 <kernels per step>'");
      }
      header = true;
      continue;
    }
    if (kind == "alloc") {
      uint64_t id = 0;
      Alloc x;
      if (!number(word(line, pos), &id) || id != t.allocs.size()) return fail("expected alloc id " + std::to_string(t.allocs.size()));
      if (!number(word(line, pos), &x.bytes)) return fail("expected the allocation's bytes");
      const std::string_view born = word(line, pos);
      if (born != "persistent" && (!number(born, &x.born) || !number(word(line, pos), &x.died))) {
        return fail("expected 'persistent' or '<born> <died>'");
      }
      t.allocs.push_back(x);
    } else if (kind == "kernel") {
      uint64_t p = 0;
      Kernel k;
      if (!number(word(line, pos), &p) || p != t.kernels.size()) return fail("expected kernel " + std::to_string(t.kernels.size()));
      if (!number(word(line, pos), &k.fn)) return fail("expected the kernel's function number");
      if (!number(word(line, pos), &k.dur_ns)) return fail("expected the kernel's duration in ns");
      for (std::string_view w = word(line, pos); !w.empty(); w = word(line, pos)) {
        uint32_t a = 0;
        if (!number(w, &a)) return fail("expected an allocation id, not '" + std::string(w) + "'");
        k.uses.push_back(a);
      }
      std::sort(k.uses.begin(), k.uses.end());
      k.uses.erase(std::unique(k.uses.begin(), k.uses.end()), k.uses.end());
      t.kernels.push_back(std::move(k));
    } else {
      return fail("unknown record '" + std::string(kind) + "'");
    }
  }
  if (!header) return fail("empty: no 'timeline' line");
  if (t.kernels.size() != period) {
    return fail("the header says " + std::to_string(period) + " kernels, the file has " + std::to_string(t.kernels.size()));
  }
  if (std::string why = t.check(); !why.empty()) return fail(why);
  *out = std::move(t);
  return true;
}

}  // namespace gms::policy
