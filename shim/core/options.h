#pragma once
#include <cstddef>
#include <cstdint>

#include "log.h"

namespace gms {

enum class Policy : uint8_t { off, spill, managed, pinned, swap, auto_ };
enum class SpillTo : uint8_t { managed, pinned };
enum class Prefetch : uint8_t { launch, off };
enum class SwapOrder : uint8_t { context, scan };
enum class RegisterMode : uint8_t { auto_, always, off };
struct Bool {
  bool value = false;
};

// A size, either absolute or a share of something the shim learns later (device memory, RAM).
struct Size {
  uint64_t bytes = 0;
};
// Sizes with a range of their own, checked where they are parsed (the shim and `run` alike).
struct ChunkSize : Size {};      // a power of two from 2M to 64M (slabs are aligned to it)
struct HostThreshold : Size {};  // at least 64K: below it nearly every block is tracked
struct SizeOrPercent {
  uint64_t bytes = 0;
  double percent = 0;  // used when is_percent
  bool is_percent = false;
  uint64_t resolve(uint64_t whole) const {
    return is_percent ? static_cast<uint64_t>(static_cast<double>(whole) * percent / 100.0) : bytes;
  }
};

// A budget for all devices, per device, or both ("8G", "50%", "0:8G,1:4G").
struct DeviceLimits {
  static constexpr int kMaxDevices = 64;
  bool any = false;  // something was set
  bool has_all = false;
  SizeOrPercent all;
  bool has[kMaxDevices] = {};
  SizeOrPercent per_device[kMaxDevices];
  // The budget of one device of `total` bytes; `total` when nothing limits it.
  uint64_t for_device(int dev, uint64_t total) const {
    uint64_t v = total;
    if (dev >= 0 && dev < kMaxDevices && has[dev]) v = per_device[dev].resolve(total);
    else if (has_all) v = all.resolve(total);
    return v < total ? v : total;
  }
};

// A path with patterns (%p pid, %h host, %r rank, %t start time, %% a percent sign); empty: off.
struct TracePath {
  char path[512] = {};
};

struct StatsTarget {
  enum class Kind : uint8_t { off, text_stderr, json_stderr, json_file } kind = Kind::off;
  char path[512] = {};
};

struct Options {
#define GMS_OPTION(field, NAME, Type, def, accepted, doc) Type field{};
#include "options.def"
#undef GMS_OPTION
};

struct OptionInfo {
  const char* name;  // full variable name, GPUMEMSHIM_...
  const char* default_value;
  const char* accepted;
  const char* doc;
};
const OptionInfo* option_table(size_t* count);

// Parsers, public so that unit tests can check every accepted and rejected form.
bool parse_value(const char* text, Policy* out);
bool parse_value(const char* text, SpillTo* out);
bool parse_value(const char* text, Prefetch* out);
bool parse_value(const char* text, SwapOrder* out);
bool parse_value(const char* text, RegisterMode* out);
bool parse_value(const char* text, Bool* out);
bool parse_value(const char* text, DeviceLimits* out);
bool parse_value(const char* text, StatsTarget* out);
bool parse_value(const char* text, TracePath* out);
bool parse_value(const char* text, LogLevel* out);
bool parse_value(const char* text, Size* out);
bool parse_value(const char* text, ChunkSize* out);
bool parse_value(const char* text, HostThreshold* out);
bool parse_value(const char* text, SizeOrPercent* out);
bool parse_bool(const char* text, bool* out);
bool parse_size(const char* text, uint64_t* out);

// Reads GPUMEMSHIM_* from an environment block (environ, never getenv: it runs during preload).
// Every invalid value is reported as one line naming the variable, the value and the accepted forms,
// and that option keeps its default. Unknown GPUMEMSHIM_* names are reported as well. Returns the
// number of invalid values (unknown names do not count: a typo warns but does not disable the shim).
// Allocates nothing.
using OptionReport = void (*)(const char* line, void* ctx);
int parse_options(char* const* env, Options* out, OptionReport report, void* ctx);

// Whether `value` is valid for the option named `variable` (GPUMEMSHIM_...); when it is not, *why
// says what was wrong beyond the accepted forms ("a percentage above 100", "a device given twice"),
// or is nullptr. False for unknown names.
bool check_option_value(const char* variable, const char* value, const char** why);

// Invalid values are reported once per process tree: the first process that reports them sets
// kReportedVariable to the fingerprint of its GPUMEMSHIM_* settings, and children that inherit the
// same settings stay quiet (they still run as pass-through).
inline constexpr const char kReportedVariable[] = "GPUMEMSHIM_REPORTED";
uint64_t settings_fingerprint(char* const* env);
// True when `env` marks exactly these settings as reported already.
bool settings_reported(char* const* env);

// Same, into defaults only: what an empty environment gives.
Options default_options();

// The process's environment block: the one place the shim reads `environ` (env_value too), never
// getenv (it may run during preload).
char* const* process_environment();

// The variables of others that the shim reads (options.def, GMS_ENV).
enum class Env : uint8_t {
#define GMS_ENV(id, NAME, doc) id,
#include "options.def"
#undef GMS_ENV
  count
};
struct EnvInfo {
  const char* name;
  const char* doc;
};
const EnvInfo* env_table(size_t* count);
// The value of `name` in an environment block (its first entry, as getenv answers); nullptr if unset.
const char* env_lookup(char* const* env, const char* name);
// The value of the variable in the process's environment now (never getenv: it may run during
// preload); nullptr if unset.
const char* env_value(Env e);

// "%p" in a path becomes the pid; returns false if it does not fit.
bool expand_path_pattern(const char* pattern, long pid, char* out, size_t out_size);

}  // namespace gms
