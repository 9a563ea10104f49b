#include "runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "guard.h"
#include "log.h"

extern char** environ;

namespace gms {

thread_local int t_shim_depth __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<uint64_t> g_host_threshold{1024 * 1024};

namespace {

Stats g_stats;  // only atomics: constant-initialised and never destroyed in a harmful way
NoDestructor<Registry> g_cuda_regions;
NoDestructor<Registry> g_host_blocks;
NoDestructor<Registry> g_host_registrations;
NoDestructor<Options> g_options{default_options()};
std::atomic<bool> g_passthrough{false};
std::atomic<bool> g_exiting{false};
std::atomic<bool> g_initialised{false};

void report_option(const char* line, void*) {
  Line l;
  l.str(line);
  log(LogLevel::warn, l);
}

void fork_prepare() {
  g_cuda_regions->lock_for_fork();
  g_host_blocks->lock_for_fork();
  g_host_registrations->lock_for_fork();
}

void fork_parent() {
  g_host_registrations->unlock_in_parent();
  g_host_blocks->unlock_in_parent();
  g_cuda_regions->unlock_in_parent();
}

void fork_child() {
  g_host_registrations->reinit_in_child();
  g_host_blocks->reinit_in_child();
  g_cuda_regions->reinit_in_child();
  ShimScope scope;
  // A child has no usable CUDA context of its parent: its device regions are not its own. Host
  // blocks stay mapped in the child and stay tracked. Counters restart so each process reports
  // only what it did itself.
  g_cuda_regions->clear();
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
    if (g_stats.family(f).calls.load(std::memory_order_relaxed) != 0) return true;
  }
  return false;
}

}  // namespace

Stats& runtime_stats() { return g_stats; }
Registry& cuda_regions() { return *g_cuda_regions; }
Registry& host_blocks() { return *g_host_blocks; }
Registry& host_registrations() { return *g_host_registrations; }
const Options& options() { return *g_options; }
bool passthrough() { return g_passthrough.load(std::memory_order_relaxed); }
bool exiting() { return g_exiting.load(std::memory_order_relaxed); }

void runtime_init() {
  ShimScope scope;
  Options parsed;
  int invalid = parse_options(environ, &parsed, report_option, nullptr);
  *g_options = parsed;
  set_log_level(parsed.log);
  g_host_threshold.store(parsed.host_threshold.bytes, std::memory_order_relaxed);
  if (invalid) g_passthrough.store(true, std::memory_order_relaxed);
  if (!g_initialised.exchange(true)) pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void runtime_report() {
  ShimScope scope;
  g_exiting.store(true, std::memory_order_relaxed);
  const StatsTarget& t = g_options->stats;
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
      int fd = -1;
      if (expand_path_pattern(t.path, pid, path, sizeof(path))) {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      }
      if (fd < 0) {
        Line l;
        l.str("cannot write statistics to GPUMEMSHIM_STATS='").str(t.path).str("'");
        log(LogLevel::warn, l);
        return;
      }
      g_stats.print_json(fd, pid);
      close(fd);
      break;
    }
  }
}

}  // namespace gms
