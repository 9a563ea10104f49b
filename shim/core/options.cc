#include "options.h"

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace gms {
namespace {

constexpr const char kPrefix[] = "GPUMEMSHIM_";
constexpr size_t kPrefixLen = sizeof(kPrefix) - 1;

const OptionInfo kTable[] = {
#define GMS_OPTION(field, NAME, Type, def, accepted, doc) {"GPUMEMSHIM_" NAME, def, accepted, doc},
#include "options.def"
#undef GMS_OPTION
};

const EnvInfo kEnvTable[] = {
#define GMS_ENV(id, NAME, doc) {NAME, doc},
#include "options.def"
#undef GMS_ENV
};

bool ieq(const char* a, const char* b) {
  for (; *a && *b; ++a, ++b) {
    char x = *a, y = *b;
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return *a == *b;
}

// Parses a decimal number with an optional fraction ("1.5"). Returns the end or nullptr.
const char* parse_decimal(const char* s, double* out) {
  if (*s < '0' || *s > '9') return nullptr;
  double v = 0;
  while (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
  if (*s == '.') {
    ++s;
    if (*s < '0' || *s > '9') return nullptr;
    double scale = 0.1;
    while (*s >= '0' && *s <= '9') {
      v += (*s++ - '0') * scale;
      scale /= 10;
    }
  }
  *out = v;
  return s;
}

// Text from the environment, with control characters shown as '?': a report stays one line.
Line& safe(Line& l, const char* s, size_t n) {
  for (size_t i = 0; i < n && s[i]; ++i) l.chr(static_cast<unsigned char>(s[i]) < 0x20 || s[i] == 0x7f ? '?' : s[i]);
  return l;
}

void report_line(OptionReport report, void* ctx, const char* name, const char* value, const char* why,
                 const char* accepted, const char* consequence) {
  Line l;
  l.str(name).str("='");
  safe(l, value, std::strlen(value)).str("' is not valid (");
  if (why) l.str(why).str("; ");
  l.str("expected ").str(accepted).str("); ").str(consequence);
  report(l.data(), ctx);
}

// Parsers that can say what was wrong beyond the accepted forms; the public parse_value overloads
// are these without the reason.
bool size_why(const char* t, uint64_t* out, const char** why);
bool size_or_percent_why(const char* t, SizeOrPercent* out, const char** why);
bool device_limits_why(const char* t, DeviceLimits* out, const char** why);

template <typename T>
bool parse_why(const char* t, T* out, const char**) {
  return parse_value(t, out);
}
bool parse_why(const char* t, Size* out, const char** why) { return size_why(t, &out->bytes, why); }
bool parse_why(const char* t, SizeOrPercent* out, const char** why) { return size_or_percent_why(t, out, why); }
bool parse_why(const char* t, DeviceLimits* out, const char** why) { return device_limits_why(t, out, why); }
bool parse_why(const char* t, ChunkSize* out, const char** why) {
  if (!size_why(t, &out->bytes, why)) return false;
  uint64_t b = out->bytes;
  if (b >= (2u << 20) && b <= (64u << 20) && (b & (b - 1)) == 0) return true;
  *why = "not a power of two from 2M to 64M";
  return false;
}
bool parse_why(const char* t, HostThreshold* out, const char** why) {
  if (!size_why(t, &out->bytes, why)) return false;
  if (out->bytes >= (64u << 10)) return true;
  *why = "below 64K";
  return false;
}

template <typename T>
bool parse_one(const char* name, const char* value, const char* accepted, T* field, OptionReport report,
               void* ctx) {
  T parsed{};
  const char* why = nullptr;
  if (parse_why(value, &parsed, &why)) {
    *field = parsed;
    return true;
  }
  report_line(report, ctx, name, value, why, accepted, "the shim runs as pass-through");
  return false;
}

// FNV-1a of one environment entry.
uint64_t entry_hash(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h;
}

bool is_reported_mark(const char* kv) {
  size_t n = sizeof(kReportedVariable) - 1;
  return std::strncmp(kv, kReportedVariable, n) == 0 && kv[n] == '=';
}

}  // namespace

const OptionInfo* option_table(size_t* count) {
  *count = sizeof(kTable) / sizeof(kTable[0]);
  return kTable;
}

bool parse_bool(const char* t, bool* out) {
  if (ieq(t, "1") || ieq(t, "true") || ieq(t, "on") || ieq(t, "yes")) return *out = true, true;
  if (ieq(t, "0") || ieq(t, "false") || ieq(t, "off") || ieq(t, "no")) return *out = false, true;
  return false;
}

bool parse_size(const char* t, uint64_t* out) {
  const char* why = nullptr;
  return size_why(t, out, &why);
}

namespace {

bool size_why(const char* t, uint64_t* out, const char** why) {
  double v = 0;
  const char* s = parse_decimal(t, &v);
  if (!s) return false;
  double mult = 1;
  switch (*s) {
    case 'k': case 'K': mult = 1024.0; ++s; break;
    case 'm': case 'M': mult = 1024.0 * 1024; ++s; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; ++s; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; ++s; break;
    default: break;
  }
  if (mult > 1) {
    // Accept "4G", "4GB" and "4GiB", all binary: nobody asks for a 4,000,000,000-byte budget.
    if (*s == 'i' || *s == 'I') ++s;
    if (*s == 'b' || *s == 'B') ++s;
  } else if (*s == 'b' || *s == 'B') {
    ++s;
  }
  if (*s != '\0') return false;
  double bytes = v * mult;
  if (bytes >= 18446744073709551615.0) {
    *why = "too large";
    return false;
  }
  if (mult == 1 && v != static_cast<double>(static_cast<uint64_t>(v))) return false;  // "1.5" bytes
  *out = static_cast<uint64_t>(bytes);
  return true;
}

bool size_or_percent_why(const char* t, SizeOrPercent* out, const char** why) {
  if (ieq(t, "off")) return *out = SizeOrPercent{}, true;
  size_t n = std::strlen(t);
  if (n > 1 && t[n - 1] == '%') {
    char tmp[32];
    if (n - 1 >= sizeof(tmp)) return false;
    std::memcpy(tmp, t, n - 1);
    tmp[n - 1] = '\0';
    double v = 0;
    const char* end = parse_decimal(tmp, &v);
    if (!end || *end != '\0') return false;
    if (v <= 0 || v > 100) {
      *why = v > 100 ? "a percentage above 100" : "a percentage of 0";
      return false;
    }
    out->is_percent = true;
    out->percent = v;
    out->bytes = 0;
    return true;
  }
  out->is_percent = false;
  return size_why(t, &out->bytes, why);
}

bool device_limits_why(const char* t, DeviceLimits* out, const char** why) {
  *out = DeviceLimits{};
  if (*t == '\0') return true;  // empty: no limit
  char item[64];
  for (const char* p = t;;) {
    const char* end = std::strchr(p, ',');
    size_t n = end ? static_cast<size_t>(end - p) : std::strlen(p);
    if (n == 0 || n >= sizeof(item)) return false;
    std::memcpy(item, p, n);
    item[n] = '\0';
    const char* colon = std::strchr(item, ':');
    if (colon) {
      double dev = 0;
      const char* after = parse_decimal(item, &dev);
      if (after != colon) return false;
      if (dev >= DeviceLimits::kMaxDevices) {
        *why = "a device number above 63";
        return false;
      }
      if (dev != static_cast<int>(dev)) return false;
      int d = static_cast<int>(dev);
      if (out->has[d]) {
        *why = "a device given twice";
        return false;
      }
      if (!size_or_percent_why(colon + 1, &out->per_device[d], why)) return false;
      out->has[d] = true;
    } else {
      if (out->has_all) {
        *why = "two limits for every device";
        return false;
      }
      if (!size_or_percent_why(item, &out->all, why)) return false;
      out->has_all = true;
    }
    out->any = true;
    if (!end) return true;
    p = end + 1;
  }
}

}  // namespace

bool parse_value(const char* t, Size* out) { return parse_size(t, &out->bytes); }
bool parse_value(const char* t, ChunkSize* out) {
  const char* why = nullptr;
  return parse_why(t, out, &why);
}
bool parse_value(const char* t, HostThreshold* out) {
  const char* why = nullptr;
  return parse_why(t, out, &why);
}
bool parse_value(const char* t, SizeOrPercent* out) {
  const char* why = nullptr;
  return size_or_percent_why(t, out, &why);
}

bool parse_value(const char* t, Policy* out) {
  if (ieq(t, "off")) return *out = Policy::off, true;
  if (ieq(t, "spill")) return *out = Policy::spill, true;
  if (ieq(t, "managed")) return *out = Policy::managed, true;
  if (ieq(t, "pinned")) return *out = Policy::pinned, true;
  if (ieq(t, "swap")) return *out = Policy::swap, true;
  if (ieq(t, "auto")) return *out = Policy::auto_, true;
  return false;
}

bool parse_value(const char* t, SpillTo* out) {
  if (ieq(t, "managed")) return *out = SpillTo::managed, true;
  if (ieq(t, "pinned")) return *out = SpillTo::pinned, true;
  return false;
}

bool parse_value(const char* t, Prefetch* out) {
  if (ieq(t, "launch")) return *out = Prefetch::launch, true;
  if (ieq(t, "off")) return *out = Prefetch::off, true;
  return false;
}

bool parse_value(const char* t, SwapOrder* out) {
  if (ieq(t, "context")) return *out = SwapOrder::context, true;
  if (ieq(t, "scan")) return *out = SwapOrder::scan, true;
  return false;
}

bool parse_value(const char* t, RegisterMode* out) {
  if (ieq(t, "auto")) return *out = RegisterMode::auto_, true;
  if (ieq(t, "always")) return *out = RegisterMode::always, true;
  if (ieq(t, "off")) return *out = RegisterMode::off, true;
  return false;
}

bool parse_value(const char* t, Bool* out) { return parse_bool(t, &out->value); }

bool parse_value(const char* t, DeviceLimits* out) {
  const char* why = nullptr;
  return device_limits_why(t, out, &why);
}

bool parse_value(const char* t, LogLevel* out) {
  static const struct { const char* name; LogLevel level; } kLevels[] = {
      {"quiet", LogLevel::quiet}, {"error", LogLevel::error}, {"warn", LogLevel::warn},
      {"info", LogLevel::info},   {"debug", LogLevel::debug},
  };
  for (const auto& l : kLevels) {
    if (ieq(t, l.name)) return *out = l.level, true;
  }
  return false;
}

bool parse_value(const char* t, StatsTarget* out) {
  bool b = false;
  *out = StatsTarget{};
  if (*t == '\0') return false;
  if (parse_bool(t, &b)) {
    out->kind = b ? StatsTarget::Kind::text_stderr : StatsTarget::Kind::off;
    return true;
  }
  if (ieq(t, "text")) return out->kind = StatsTarget::Kind::text_stderr, true;
  if (ieq(t, "json")) return out->kind = StatsTarget::Kind::json_stderr, true;
  size_t n = std::strlen(t);
  if (n >= sizeof(out->path)) return false;
  std::memcpy(out->path, t, n + 1);
  out->kind = StatsTarget::Kind::json_file;
  return true;
}

bool parse_value(const char* t, TracePath* out) {
  *out = TracePath{};
  size_t n = std::strlen(t);
  if (n >= sizeof(out->path)) return false;
  for (const char* p = t; *p; ++p) {
    if (*p != '%') continue;
    ++p;
    if (*p != 'p' && *p != 'h' && *p != 'r' && *p != 't' && *p != '%') return false;
  }
  std::memcpy(out->path, t, n + 1);
  return true;
}

Options default_options() {
  Options o;
#define GMS_OPTION(field, NAME, Type, def, accepted, doc) \
  if (!parse_value(def, &o.field)) std::abort(); /* a bad default is a build defect */
#include "options.def"
#undef GMS_OPTION
  return o;
}

int parse_options(char* const* env, Options* out, OptionReport report, void* ctx) {
  *out = default_options();
  int invalid = 0;
  if (!env) return 0;
  for (char* const* e = env; *e; ++e) {
    const char* kv = *e;
    if (std::strncmp(kv, kPrefix, kPrefixLen) != 0) continue;
    const char* eq = std::strchr(kv, '=');
    if (!eq || is_reported_mark(kv)) continue;
    const char* name = kv + kPrefixLen;
    size_t name_len = static_cast<size_t>(eq - name);
    const char* value = eq + 1;
    bool known = false;
#define GMS_OPTION(field, NAME, Type, def, accepted, doc)                                              \
  if (!known && name_len == sizeof(NAME) - 1 && std::strncmp(name, NAME, name_len) == 0) {            \
    known = true;                                                                                     \
    if (!parse_one("GPUMEMSHIM_" NAME, value, accepted, &out->field, report, ctx)) ++invalid;         \
  }
#include "options.def"
#undef GMS_OPTION
    if (!known) {
      Line l;
      safe(l.str("unknown variable "), kv, static_cast<size_t>(eq - kv))
          .str(" ignored (gpumemshim options lists the known ones)");
      report(l.data(), ctx);
    }
  }
  return invalid;
}

bool check_option_value(const char* variable, const char* value, const char** why) {
  *why = nullptr;
#define GMS_OPTION(field, NAME, Type, def, accepted, doc) \
  if (std::strcmp(variable, "GPUMEMSHIM_" NAME) == 0) {   \
    Type parsed{};                                        \
    return parse_why(value, &parsed, why);                \
  }
#include "options.def"
#undef GMS_OPTION
  return false;
}

uint64_t settings_fingerprint(char* const* env) {
  uint64_t sum = 0;  // a sum: the order of the environment does not matter (shells reorder it)
  for (char* const* e = env; e && *e; ++e) {
    if (std::strncmp(*e, kPrefix, kPrefixLen) == 0 && !is_reported_mark(*e)) sum += entry_hash(*e);
  }
  return sum;
}

bool settings_reported(char* const* env) {
  for (char* const* e = env; e && *e; ++e) {
    if (!is_reported_mark(*e)) continue;
    const char* v = *e + sizeof(kReportedVariable);
    uint64_t mark = 0;
    for (; (*v >= '0' && *v <= '9') || (*v >= 'a' && *v <= 'f'); ++v) mark = mark * 16 + (*v <= '9' ? *v - '0' : *v - 'a' + 10);
    return *v == '\0' && mark == settings_fingerprint(env);
  }
  return false;
}

char* const* process_environment() { return environ; }

const EnvInfo* env_table(size_t* count) {
  *count = sizeof(kEnvTable) / sizeof(kEnvTable[0]);
  return kEnvTable;
}

const char* env_lookup(char* const* env, const char* name) {
  const size_t n = std::strlen(name);
  for (char* const* e = env; e && *e; ++e) {
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return nullptr;
}

const char* env_value(Env e) { return env_lookup(environ, kEnvTable[static_cast<int>(e)].name); }

bool expand_path_pattern(const char* pattern, long pid, char* out, size_t out_size) {
  Line l;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'p') {
      l.i64(pid);
      ++p;
    } else {
      l.chr(*p);
    }
  }
  if (l.size() + 1 > out_size || l.size() >= 1023) return false;  // 1023: Line truncated it
  std::memcpy(out, l.data(), l.size() + 1);
  return true;
}

}  // namespace gms
