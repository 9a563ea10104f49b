#include "runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "guard.h"
#include "log.h"
#include "out_file.h"

namespace gms {

// Only atomics: constant-initialised, so valid before any constructor of this library runs.
constinit Stats g_stats;

thread_local int t_shim_depth __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<uint64_t> g_host_threshold{1024 * 1024};

namespace {

// Only atomics: constant-initialised as well.
constinit DeviceLedger g_ledger;

// The rest is built on first use, never destroyed. A global with a dynamic initialiser would be
// wrong twice over: a malloc hook can run before it is constructed, and the library constructor
// (runtime_init) can run before it and then be overwritten by it.
Registry& cuda_regions_() {
  static NoDestructor<Registry> r;
  return *r;
}
Registry& host_blocks_() {
  static NoDestructor<Registry> r;
  return *r;
}
Registry& host_registrations_() {
  static NoDestructor<Registry> r;
  return *r;
}
Options& options_() {
  static NoDestructor<Options> o{default_options()};
  return *o;
}
std::atomic<bool> g_passthrough{false};
std::atomic<bool> g_exiting{false};
std::atomic<bool> g_initialised{false};

void report_option(const char* line, void* reported) {
  ++*static_cast<int*>(reported);
  Line l;
  l.str(line);
  log(LogLevel::warn, l);
}
void quiet_option(const char*, void*) {}

// Marks the environment (options.h, kReportedVariable) so that child processes inheriting these
// settings do not say the same again: one report per process tree, not one per process.
void mark_reported() {
  Line value;
  value.hex(settings_fingerprint(process_environment()));
  setenv(kReportedVariable, value.data() + 2, 1);  // the digits, without "0x"
}

void fork_prepare() {
  cuda_regions_().lock_for_fork();
  host_blocks_().lock_for_fork();
  host_registrations_().lock_for_fork();
}

void fork_parent() {
  host_registrations_().unlock_in_parent();
  host_blocks_().unlock_in_parent();
  cuda_regions_().unlock_in_parent();
}

void fork_child() {
  host_registrations_().reinit_in_child();
  host_blocks_().reinit_in_child();
  cuda_regions_().reinit_in_child();
  ShimScope scope;
  // A child has no usable CUDA context of its parent: its device regions are not its own. Host
  // blocks stay mapped in the child and stay tracked. Counters restart so each process reports
  // only what it did itself.
  cuda_regions_().clear();
  g_ledger.reset();
  g_stats.reset();
  for (int i = 0; i < kMemKindCount; ++i) {
    auto k = static_cast<MemKind>(i);
    if (k != MemKind::host_block && k != MemKind::registered_host) g_stats.live_sub(k, g_stats.live(k));
  }
}

bool used_cuda() {
  for (int i = 0; i < kFamilyCount; ++i) {
    auto f = static_cast<Family>(i);
    if (f == Family::host_block_alloc || f == Family::host_block_free) continue;
    if (g_stats.family(f).calls != 0) return true;
  }
  return false;
}

}  // namespace

DeviceLedger& ledger() { return g_ledger; }
Registry& cuda_regions() { return cuda_regions_(); }
Registry& host_blocks() { return host_blocks_(); }
Registry& host_registrations() { return host_registrations_(); }
const Options& options() { return options_(); }
bool passthrough() { return g_passthrough.load(std::memory_order_relaxed); }
bool exiting() { return g_exiting.load(std::memory_order_relaxed); }

void runtime_init() {
  ShimScope scope;
  Options parsed;
  int reported = 0;
  bool said_before = settings_reported(process_environment());
  int invalid = parse_options(process_environment(), &parsed, said_before ? quiet_option : report_option, &reported);
  if (reported && log_enabled(LogLevel::warn)) mark_reported();
  options_() = parsed;
  set_log_level(parsed.log);
  g_host_threshold.store(parsed.host_threshold.bytes, std::memory_order_relaxed);
  if (invalid) g_passthrough.store(true, std::memory_order_relaxed);
  if (!g_initialised.exchange(true)) pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void runtime_report() {
  ShimScope scope;
  g_exiting.store(true, std::memory_order_relaxed);
  const StatsTarget& t = options_().stats;
  if (t.kind == StatsTarget::Kind::off || !used_cuda()) return;
  long pid = static_cast<long>(getpid());
  switch (t.kind) {
    case StatsTarget::Kind::off:
      break;
    case StatsTarget::Kind::text_stderr:
      g_stats.print_text(2);
      break;
    case StatsTarget::Kind::json_stderr:
      g_stats.print_json(2, pid);
      break;
    case StatsTarget::Kind::json_file: {
      char path[sizeof(t.path) + 32];
      OutFile f;
      OutFileError e{"the path is too long", 0};
      bool ok = expand_path_pattern(t.path, pid, path, sizeof(path)) && out_file_create(path, 0644, &f, &e);
      if (ok && (e.err = g_stats.print_json(f.fd, pid)) != 0) {
        e.what = "cannot write the file";
        out_file_discard(&f);
        ok = false;
      }
      if (ok) ok = out_file_finish(&f, &e);
      if (!ok) {
        Line l;
        l.str("cannot write statistics to GPUMEMSHIM_STATS='").str(t.path).str("' (").str(e.what);
        if (e.err) l.str(": ").str(strerror(e.err));
        l.str(")");
        log(LogLevel::warn, l);
      }
      break;
    }
  }
}

}  // namespace gms
