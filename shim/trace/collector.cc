// The collector: the ring the hooks write into, the trace file, the writer thread, and the life
// cycle (first event, fork, exit, flush on demand).
//
// States: off (no GPUMEMSHIM_TRACE) -> idle (configured, nothing recorded yet) -> starting (the
// first event's thread opens the file, starts CUPTI, writes the header) -> running -> stopped (at
// exit, or after a write error). A fork child goes back to idle when the path has %p (its own
// file), else to untraced_child (one warning at its first event, then stopped).
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/guard.h"
#include "core/log.h"
#include "core/out_file.h"
#include "core/runtime.h"
#include "format.h"
#include "gms/build_config.h"
#include "names.h"
#include "out.h"
#include "record.h"
#include "sites.h"
#include "trace.h"

namespace gms::trace {

std::atomic<bool> g_on{false};
thread_local CopyCall t_copy __attribute__((tls_model("initial-exec"))) = {nullptr, 0, CopyPath::driver};

namespace {

// ---- the ring: bounded, lock-free for producers, one consumer at a time (under g_write_mu) ----
//
// Slot sequence words count laps: 2L means empty for lap L, 2L+1 full for lap L. Zero is "empty
// for lap 0", so the ring needs no initialisation and stays untouched BSS while tracing is off.
constexpr uint64_t kRingBits = 16;
constexpr uint64_t kRingSize = uint64_t{1} << kRingBits;  // 65536 records of 128 bytes: 8 MiB
constexpr uint64_t kRingMask = kRingSize - 1;

struct Slot {
  std::atomic<uint64_t> seq{0};
  Record rec{};  // zeroed: constant initialisation under every compiler (clang builds the fuzz targets)
};
static_assert(sizeof(Slot) == 128);

constinit Slot g_ring[kRingSize];
alignas(64) std::atomic<uint64_t> g_tail{0};  // next position to claim (its own cache line: producers CAS it)
alignas(64) std::atomic<uint64_t> g_head{0};  // next position to read; written under g_write_mu

bool try_push(const Record& r) {
  uint64_t pos = g_tail.load(std::memory_order_relaxed);
  for (;;) {
    Slot& s = g_ring[pos & kRingMask];
    uint64_t seq = s.seq.load(std::memory_order_acquire);
    uint64_t empty = 2 * (pos >> kRingBits);
    if (seq == empty) {
      if (g_tail.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        s.rec = r;
        s.seq.store(empty + 1, std::memory_order_release);
        return true;
      }
    } else if (seq < empty) {
      return false;  // the slot still holds the previous lap's record: full
    } else {
      pos = g_tail.load(std::memory_order_relaxed);
    }
  }
}

bool pop(Record* out) {
  uint64_t pos = g_head.load(std::memory_order_relaxed);
  Slot& s = g_ring[pos & kRingMask];
  uint64_t full = 2 * (pos >> kRingBits) + 1;
  if (s.seq.load(std::memory_order_acquire) != full) return false;
  *out = s.rec;
  s.seq.store(full + 1, std::memory_order_release);
  g_head.store(pos + 1, std::memory_order_relaxed);
  return true;
}

// In a fork child: records of the parent's threads (some claimed and never to be published) are
// the parent's to write. Each of their slots is marked consumed.
void ring_reset_in_child() {
  uint64_t head = g_head.load(std::memory_order_relaxed), tail = g_tail.load(std::memory_order_relaxed);
  for (uint64_t pos = head; pos != tail; ++pos) {
    g_ring[pos & kRingMask].seq.store(2 * ((pos >> kRingBits) + 1), std::memory_order_relaxed);
  }
  g_head.store(tail, std::memory_order_relaxed);
}

// ---- state ----
enum State : int { kOff, kIdle, kStarting, kRunning, kStopped, kUntracedChild };
std::atomic<int> g_state{kOff};
const Backend* g_backend = nullptr;

TracePath g_pattern;
bool g_faults = false;
uint64_t g_t0 = 0;
timespec g_t0_wall{};
long g_rank = -1, g_local_rank = -1;
char g_path[1024];  // the expanded path of the open file

pthread_mutex_t g_write_mu = PTHREAD_MUTEX_INITIALIZER;  // the file, g_out, the ring's consumer side
char g_out_buf[256 * 1024];
constinit Out g_out(g_out_buf, sizeof(g_out_buf));
uint64_t g_events = 0;                                 // event lines written (under g_write_mu)
std::atomic<uint64_t> g_dropped[2] = {};               // [0] the shim's events, [1] CUPTI's
uint64_t g_dropped_reported[2] = {};                   // under g_write_mu
const char* const kDropSource[2] = {"shim", "cupti"};

std::atomic<int> g_wake{0};  // futex word: a producer saw the ring half full
constexpr long kWriterPeriodNs = 50 * 1000 * 1000;

constexpr int kMaxDevices = DeviceLedger::kMaxDevices;
std::atomic<int64_t> g_budget_last[kMaxDevices] = {};  // t + 1 of the last line; 0: none yet
std::atomic<bool> g_budget_dirty[kMaxDevices] = {};
constexpr int64_t kBudgetPeriodNs = 1000 * 1000;

void futex_wait(std::atomic<int>* word, int expected, long timeout_ns) {
  timespec ts{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}
void futex_wake(std::atomic<int>* word) {
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void wake_if_filling() {
  uint64_t fill = g_tail.load(std::memory_order_relaxed) - g_head.load(std::memory_order_relaxed);
  if (fill >= kRingSize / 2 && g_wake.exchange(1, std::memory_order_relaxed) == 0) futex_wake(&g_wake);
}

// ---- paths and the file ----

long env_number(Env name) {
  const char* v = env_value(name);
  if (!v || *v < '0' || *v > '9') return -1;
  long x = 0;
  for (; *v >= '0' && *v <= '9'; ++v) x = x * 10 + (*v - '0');
  return *v == '\0' && x < (1L << 30) ? x : -1;
}

void start_time_text(char out[16]) {  // YYYYmmdd-HHMMSS, UTC
  tm t{};
  gmtime_r(&g_t0_wall.tv_sec, &t);
  Line l;
  auto two = [&](int v) { l.chr(static_cast<char>('0' + v / 10)).chr(static_cast<char>('0' + v % 10)); };
  l.i64(t.tm_year + 1900);
  two(t.tm_mon + 1);
  two(t.tm_mday);
  l.chr('-');
  two(t.tm_hour);
  two(t.tm_min);
  two(t.tm_sec);
  std::memcpy(out, l.data(), 15);
  out[15] = '\0';
}

bool expand(char* out, size_t size) {
  Line l;
  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  char when[16];
  start_time_text(when);
  for (const char* p = g_pattern.path; *p; ++p) {
    if (*p != '%') {
      l.chr(*p);
      continue;
    }
    switch (*++p) {
      case 'p': l.i64(getpid()); break;
      case 'h': l.str(host); break;
      case 'r': l.i64(g_rank < 0 ? 0 : g_rank); break;
      case 't': l.str(when); break;
      case '%': l.chr('%'); break;
      default: return false;  // the option's parser accepts no other
    }
  }
  if (l.size() + 1 > size || l.size() >= 1000) return false;
  std::memcpy(out, l.data(), l.size() + 1);
  return true;
}

void warn_untraced(const char* path, const OutFileError& e) {
  Line l;
  l.str("cannot write the trace to '").str(path).str("' (").str(e.what);
  if (e.err) l.str(": ").str(strerror(e.err));
  l.str("): the program runs untraced");
  log(LogLevel::warn, l);
}

// Made by core/out_file and published at once, so the trace of a killed process is where the user
// looks for it; a symlink, device or another user's file at the path is left alone.
int open_trace_file() {
  if (!expand(g_path, sizeof(g_path))) {
    warn_untraced(g_pattern.path, {"the path is too long", 0});
    return -1;
  }
  OutFile f;
  OutFileError e;
  if (!out_file_create(g_path, 0600, &f, &e) || !out_file_publish(&f, &e)) {
    warn_untraced(g_path, e);
    return -1;
  }
  return f.fd;
}

// ---- the header ----

void write_argv(Out& out) {
  out.key("argv").chr('[');
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  static char buf[16384];
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
  if (fd >= 0) close(fd);
  bool first = true;
  for (ssize_t i = 0; n > 0 && i < n;) {
    size_t len = strnlen(buf + i, static_cast<size_t>(n - i));
    if (!first) out.chr(',');
    out.str(buf + i, len);
    first = false;
    i += static_cast<ssize_t>(len) + 1;
  }
  out.chr(']');
}

void write_wall_t0(Out& out) {
  tm t{};
  gmtime_r(&g_t0_wall.tv_sec, &t);
  Line l;
  auto two = [&](int v) { l.chr(static_cast<char>('0' + v / 10)).chr(static_cast<char>('0' + v % 10)); };
  l.i64(t.tm_year + 1900).chr('-');
  two(t.tm_mon + 1);
  l.chr('-');
  two(t.tm_mday);
  l.chr('T');
  two(t.tm_hour);
  l.chr(':');
  two(t.tm_min);
  l.chr(':');
  two(t.tm_sec);
  l.chr('Z');
  out.key("wall_t0").str(l.data(), l.size());
}

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::off: return "off";
    case Policy::spill: return "spill";
    case Policy::managed: return "managed";
    case Policy::pinned: return "pinned";
    case Policy::swap: return "swap";
    case Policy::auto_: return "auto";
  }
  return "off";
}

void write_header(Out& out, const char* cupti) {
  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  out.open("header").key("format").str("gpumemshim-trace").key("version").u64(1);
  out.key("host").str(host).key("pid").i64(getpid());
  if (g_rank >= 0) out.key("rank").i64(g_rank);
  if (g_local_rank >= 0) out.key("local_rank").i64(g_local_rank);
  write_argv(out);
  out.key("t0_ns").u64(g_t0);
  write_wall_t0(out);
  out.key("shim_version").str(GMS_VERSION);
  out.key("policy").str(passthrough() ? "off" : policy_name(options().policy));
  if (passthrough()) out.key("passthrough").boolean(true);
  if (g_backend && g_backend->describe) {
    g_backend->describe(out);
  } else {
    out.key("devices").raw("[]");
  }
  out.key("cupti").str(cupti).key("faults").boolean(g_faults);
  out.key("sites_min_bytes").u64(sites::threshold());
  if (g_backend && g_backend->header_extra) g_backend->header_extra(out);
  out.close();
}

// ---- writing (under g_write_mu) ----

// Every writer (the writer thread, a flush, CUPTI's thread, exit) holds g_write_mu and checks the
// state first, so only the first failure of a file gets here with the file still running.
void stop_on_write_error(int close_err = 0) {
  if (g_state.load(std::memory_order_acquire) != kRunning) return;
  int err = close_err ? close_err : g_out.error();
  g_on.store(false, std::memory_order_relaxed);
  g_state.store(kStopped, std::memory_order_release);
  if (g_out.fd() >= 0) close(g_out.fd());
  g_out.set_fd(-1);
  Line l;
  l.str("cannot write the trace to '").str(g_path).str("' (").str(strerror(err ? err : EIO))
      .str("): tracing stopped, the program goes on");
  log(LogLevel::warn, l);
}

void budget_line(Out& out, int dev, int64_t t) {
  const DeviceLedger& l = ledger();
  out.open("budget").key("t").i64(t).key("device").i64(dev).key("limit").u64(l.limit(dev));
  out.key("used").u64(l.used(dev)).key("resident").u64(l.resident(dev)).close();
  ++g_events;
}

// Budgets that changed within a millisecond of their last line get theirs now (or, at the end,
// whatever the time: the last values are always in the file).
void pending_budgets(bool final) {
  int64_t t = now();
  for (int dev = 0; dev < kMaxDevices; ++dev) {
    if (!g_budget_dirty[dev].load(std::memory_order_relaxed)) continue;
    int64_t last = g_budget_last[dev].load(std::memory_order_relaxed);
    if (!final && last != 0 && t - (last - 1) < kBudgetPeriodNs) continue;
    if (!g_budget_last[dev].compare_exchange_strong(last, t + 1, std::memory_order_relaxed)) continue;
    g_budget_dirty[dev].store(false, std::memory_order_relaxed);
    budget_line(g_out, dev, t);
  }
}

// The registration cache's totals (act/copy counts them in the statistics), at most once a second
// when they changed, and at the end.
struct CacheTotals {
  uint64_t hits, misses, evictions, invalidations, bytes;
  bool operator==(const CacheTotals&) const = default;
};
CacheTotals g_cache_written{};
int64_t g_cache_t = 0;  // t + 1 of the last cache line; 0: none yet
constexpr int64_t kCachePeriodNs = 1000 * 1000 * 1000;

void cache_line(bool final) {
  const Stats& st = runtime_stats();
  int64_t t = now();
  if (!final && g_cache_t != 0 && t - (g_cache_t - 1) < kCachePeriodNs) return;
  uint64_t registered_copies = st.decision(Decision::copy_registered).calls;
  uint64_t hits = st.decision(Decision::cache_hit).calls;
  CacheTotals c{hits, registered_copies - (hits < registered_copies ? hits : registered_copies) +
                          st.decision(Decision::copy_staged).calls,
                st.decision(Decision::cache_evicted).calls, st.decision(Decision::invalidated).calls,
                st.live(MemKind::shim_registered)};
  if (c == g_cache_written) return;
  g_out.open("cache").key("t").i64(t).key("hits").u64(c.hits).key("misses").u64(c.misses);
  g_out.key("evictions").u64(c.evictions).key("invalidations").u64(c.invalidations).key("bytes").u64(c.bytes).close();
  ++g_events;
  g_cache_written = c;
  g_cache_t = t + 1;
}

void report_drops() {
  for (int src = 0; src < 2; ++src) {
    uint64_t d = g_dropped[src].load(std::memory_order_relaxed);
    if (d <= g_dropped_reported[src]) continue;
    g_out.open("dropped").key("t").i64(now()).key("records").u64(d - g_dropped_reported[src]);
    g_out.key("source").str(kDropSource[src]).close();
    g_dropped_reported[src] = d;
  }
}

// Writes up to `max` records, then drops and budgets. Returns the number of records taken.
size_t drain_locked(size_t max, bool final = false) {
  if (g_state.load(std::memory_order_acquire) != kRunning) return 0;
  Record r;
  size_t n = 0;
  while (n < max && pop(&r)) {
    format_record(g_out, r);
    ++g_events;
    ++n;
  }
  report_drops();
  pending_budgets(final);
  cache_line(final);
  if (!g_out.flush()) stop_on_write_error();
  return n;
}

void drain_all_locked() {
  while (drain_locked(kRingSize) == kRingSize) {
  }
}

GMS_TLS_ACCESS void* writer_main(void*) {
  ++t_shim_depth;  // everything this thread does is the shim's own: its allocations are not the program's
  for (;;) {
    futex_wait(&g_wake, 0, kWriterPeriodNs);
    g_wake.store(0, std::memory_order_relaxed);
    pthread_mutex_lock(&g_write_mu);
    bool running = g_state.load(std::memory_order_acquire) == kRunning;
    if (running) drain_locked(kRingSize);
    pthread_mutex_unlock(&g_write_mu);
    if (!running) return nullptr;
  }
}

void start_writer_thread() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the thread inherits this mask: no signal lands there
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t th;
  int err = pthread_create(&th, &attr, writer_main, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err == 0) {
    pthread_setname_np(th, "gms-trace");
  } else {
    // Without the thread the ring is drained at flushes and at exit only; say so once.
    Line l;
    l.str("cannot start the trace writer thread (").str(strerror(err)).str("): the trace is written at exit only");
    log(LogLevel::warn, l);
  }
}

// CUPTI's start (once on or failed, later calls return at once), from the program's cuInit or the
// trace's first event, whichever thread comes first.
pthread_mutex_t g_cupti_mu = PTHREAD_MUTEX_INITIALIZER;
const char* cupti_started() {
  if (!g_backend || !g_backend->start_cupti) return "no CUDA backend";
  pthread_mutex_lock(&g_cupti_mu);
  const char* r = g_backend->start_cupti(g_faults);
  pthread_mutex_unlock(&g_cupti_mu);
  return r;
}

// The first event of the process (or of a fork child with its own file).
void start() {
  ShimScope scope;
  int fd = open_trace_file();
  if (fd < 0) {
    g_on.store(false, std::memory_order_relaxed);
    g_state.store(kStopped, std::memory_order_release);
    return;
  }
  const char* cupti = cupti_started();
  if (std::strcmp(cupti, "ok") != 0 && log_enabled(LogLevel::info)) {
    Line l;
    l.str("tracing without CUPTI (no kernels, copies or migrations from the device): ").str(cupti);
    log(LogLevel::info, l);
  }
  pthread_mutex_lock(&g_write_mu);
  g_out.reset(fd);
  g_events = 0;
  write_header(g_out, cupti);
  g_state.store(kRunning, std::memory_order_release);
  if (!g_out.flush()) stop_on_write_error();
  pthread_mutex_unlock(&g_write_mu);
  if (g_state.load(std::memory_order_acquire) == kRunning) start_writer_thread();
}

void child_untraced() {
  int expected = kUntracedChild;
  if (!g_state.compare_exchange_strong(expected, kStopped)) return;
  g_on.store(false, std::memory_order_relaxed);
  Line l;
  l.str("process ").i64(getpid()).str(" (a fork child) is not traced: GPUMEMSHIM_TRACE='").str(g_pattern.path)
      .str("' has no %p, and the file belongs to its parent");
  log(LogLevel::warn, l);
}

// Starts the trace if it is idle; false where this process is not traced.
bool start_if_idle() {
  int st = g_state.load(std::memory_order_acquire);
  if (__builtin_expect(st == kRunning, 1)) return true;
  if (st == kIdle) {
    int expected = kIdle;
    if (g_state.compare_exchange_strong(expected, kStarting)) start();
  } else if (st == kUntracedChild) {
    child_untraced();
    return false;
  }
  st = g_state.load(std::memory_order_acquire);
  return st == kRunning || st == kStarting;  // records pushed while starting wait in the ring
}

// A hook's record: starts the trace at the first one. Never blocks otherwise.
void submit(const Record& r) {
  if (!start_if_idle()) return;
  if (!try_push(r)) {
    g_dropped[0].fetch_add(1, std::memory_order_relaxed);
    return;
  }
  wake_if_filling();
}

Record make(Type type, int64_t t, int device = -1) {
  Record r{};
  r.type = type;
  r.t = t;
  r.device = device;
  return r;
}

uint64_t ptr_value(const char* s) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s)); }

// ---- fork ----

// CUPTI is not flushed here: the driver's own fork handlers may hold its locks by now, and CUPTI's
// buffers reach the parent's file later anyway (a child never writes them).
void fork_prepare() {
  pthread_mutex_lock(&g_cupti_mu);
  pthread_mutex_lock(&g_write_mu);
  drain_all_locked();  // the parent's records are in its file before the child exists
  names::lock_for_fork();
}

void fork_parent() {
  names::unlock_in_parent();
  pthread_mutex_unlock(&g_write_mu);
  pthread_mutex_unlock(&g_cupti_mu);
}

void fork_child() {
  names::reinit_in_child();
  pthread_mutex_init(&g_write_mu, nullptr);
  pthread_mutex_init(&g_cupti_mu, nullptr);
  ring_reset_in_child();
  g_dropped[0].store(0, std::memory_order_relaxed);
  g_dropped[1].store(0, std::memory_order_relaxed);
  g_dropped_reported[0] = g_dropped_reported[1] = 0;
  for (int i = 0; i < kMaxDevices; ++i) {
    g_budget_last[i].store(0, std::memory_order_relaxed);
    g_budget_dirty[i].store(false, std::memory_order_relaxed);
  }
  g_cache_written = CacheTotals{};  // the child's statistics start from zero too
  g_cache_t = 0;
  if (g_out.fd() >= 0) close(g_out.fd());  // the parent's file: not ours to write or end
  g_out.set_fd(-1);
  g_out.discard();
  if (g_backend && g_backend->forked_child) g_backend->forked_child();
  int st = g_state.load(std::memory_order_relaxed);
  if (st == kOff || st == kStopped) return;
  if (std::strstr(g_pattern.path, "%p")) {
    sites::forget_written();
    g_state.store(kIdle, std::memory_order_relaxed);
  } else {
    g_state.store(kUntracedChild, std::memory_order_relaxed);
  }
}

}  // namespace

// ---- public ----

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
int64_t now() { return static_cast<int64_t>(monotonic_ns() - g_t0); }
uint64_t t0_ns() { return g_t0; }

void set_backend(const Backend* backend) { g_backend = backend; }

void configure(const Options& o) {
  static bool atfork_registered = false;
  if (g_t0 == 0) {
    g_t0 = monotonic_ns();
    clock_gettime(CLOCK_REALTIME, &g_t0_wall);
  }
  g_pattern = o.trace;
  g_faults = o.trace_faults.value;
  g_rank = env_number(Env::rank);
  g_local_rank = env_number(Env::local_rank);
  bool want = o.trace.path[0] != '\0';
  sites::configure(want ? o.trace_sites.bytes : 0);
  if (want && !atfork_registered) {
    atfork_registered = true;
    pthread_atfork(fork_prepare, fork_parent, fork_child);
  }
  int st = g_state.load(std::memory_order_relaxed);
  if (want && st == kOff) {
    g_state.store(kIdle, std::memory_order_relaxed);
    g_on.store(true, std::memory_order_relaxed);
  } else if (!want && st == kIdle) {
    g_state.store(kOff, std::memory_order_relaxed);
    g_on.store(false, std::memory_order_relaxed);
  }
}

bool configured() { return g_pattern.path[0] != '\0'; }

void finish() {
  g_on.store(false, std::memory_order_relaxed);
  if (g_state.load(std::memory_order_acquire) != kRunning) return;
  ShimScope scope;
  pthread_mutex_lock(&g_write_mu);
  if (g_state.load(std::memory_order_acquire) == kRunning) {
    drain_all_locked();
    drain_locked(0, true);  // drops and the last budgets
  }
  // A write error in the drains above stopped the trace and said so: no end line after it.
  if (g_state.load(std::memory_order_acquire) == kRunning) {
    uint64_t dropped = g_dropped[0].load(std::memory_order_relaxed) + g_dropped[1].load(std::memory_order_relaxed);
    g_out.open("end").key("t").i64(now()).key("events").u64(g_events).key("dropped").u64(dropped).close();
    if (g_out.flush()) {
      int fd = g_out.fd();
      g_out.set_fd(-1);
      if (close(fd) == 0 || errno == EINTR) g_state.store(kStopped, std::memory_order_release);
      else stop_on_write_error(errno);  // NFS reports a failed write at close
    } else {
      stop_on_write_error();
    }
  }
  pthread_mutex_unlock(&g_write_mu);
  g_wake.store(1, std::memory_order_relaxed);
  futex_wake(&g_wake);  // the writer thread sees the state and ends
}

bool flush() {
  if (g_state.load(std::memory_order_acquire) != kRunning) return false;
  ShimScope scope;
  if (g_backend && g_backend->flush_cupti) g_backend->flush_cupti(true);
  pthread_mutex_lock(&g_write_mu);
  drain_all_locked();
  // Budgets and cache totals held back by their rate limits are part of "everything so far": a
  // program that reads its trace after the flush finds the current values, and no line of what
  // came before the flush turns up after it.
  drain_locked(0, true);
  bool ok = g_state.load(std::memory_order_acquire) == kRunning;
  pthread_mutex_unlock(&g_write_mu);
  return ok;
}

void push_from_backend(const Record& r) {
  int st = g_state.load(std::memory_order_acquire);
  if (st != kRunning && st != kStarting) return;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (try_push(r)) {
      wake_if_filling();
      return;
    }
    // Full: CUPTI hands over whole buffers, so write on this (CUPTI's) thread until there is room.
    pthread_mutex_lock(&g_write_mu);
    drain_locked(kRingSize);
    pthread_mutex_unlock(&g_write_mu);
  }
  g_dropped[1].fetch_add(1, std::memory_order_relaxed);
}

void begin() {
  if (!enabled() || !start_if_idle()) return;
  // Another thread may be starting it (CUPTI loading): its counters must be on before the
  // caller makes managed memory. Bounded: a start that hangs is not this caller's to wait for.
  for (int i = 0; i < 10000 && g_state.load(std::memory_order_acquire) == kStarting; ++i) {
    struct timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
}

void start_device_records() {
  // Not idle: running (CUPTI started with it), stopped, or a child not traced.
  if (!enabled() || g_state.load(std::memory_order_acquire) != kIdle) return;
  ShimScope scope;
  (void)cupti_started();
}

void flush_device_records() {
  if (g_state.load(std::memory_order_acquire) != kRunning || !g_backend || !g_backend->flush_cupti) return;
  ShimScope scope;
  g_backend->flush_cupti(true);
}

void cupti_dropped(uint64_t n) { g_dropped[1].fetch_add(n, std::memory_order_relaxed); }

// ---- the shim's events ----

void alloc(const Region& reg) {
  Record r = make(Type::alloc, now(), reg.device);
  r.v[0] = reg.base;
  r.v[1] = reg.size;
  uint64_t min = sites::threshold();
  r.v[2] = min && reg.size >= min ? sites::capture() : 0;
  r.k1 = static_cast<uint8_t>(reg.kind);
  r.k2 = static_cast<uint8_t>(reg.placement);
  r.k3 = static_cast<uint8_t>(reg.origin);
  submit(r);
}

void free(Family f, const Region& reg) {
  Record r = make(Type::free, now(), reg.device);
  r.v[0] = reg.base;
  r.v[1] = reg.size;
  r.k1 = static_cast<uint8_t>(f);
  submit(r);
}

GMS_TLS_ACCESS void copy(Direction dir, HostKind host, uint64_t bytes) {
  int64_t end = now();
  const CopyCall& c = t_copy;
  Record r = make(Type::copy, c.api ? c.t0 : end);
  r.v[0] = bytes;
  r.v[1] = c.api ? static_cast<uint64_t>(end - c.t0) : 0;
  r.v[2] = ptr_value(c.api);
  r.k1 = static_cast<uint8_t>(dir);
  r.k2 = dir == Direction::dtod || dir == Direction::peer ? kNone : static_cast<uint8_t>(host);
  r.k3 = static_cast<uint8_t>(c.api ? c.path : CopyPath::driver);
  submit(r);
}

void decision(const char* what, uintptr_t ptr, uint64_t bytes, int device, const char* reason) {
  Record r = make(Type::decision, now(), device);
  r.v[0] = ptr;
  r.v[1] = bytes;
  r.v[2] = ptr_value(what);
  r.v[3] = ptr_value(reason);
  submit(r);
}

void launch(uint64_t seq, uintptr_t stream, uintptr_t fn, const uintptr_t* regions, size_t n) {
  const int64_t t = now();
  size_t k = 0;
  do {
    Record r = make(Type::launch, t);
    r.k1 = k == 0 ? 0 : 1;
    r.v[0] = seq;
    r.v[1] = stream;
    r.v[2] = fn;
    const size_t part = n - k < 8 ? n - k : 8;
    r.v[4] = part;
    for (size_t j = 0; j < part; ++j) r.v[5 + j] = regions[k + j];
    k += part;
    submit(r);
  } while (k < n);
}

void pages(uintptr_t base, uint64_t to_gpu, uint64_t to_cpu, uint64_t cpu, PagesAt at) {
  Record r = make(Type::pages, now());
  r.v[0] = base;
  r.v[1] = to_gpu;
  r.v[2] = to_cpu;
  r.v[3] = cpu;
  r.k1 = static_cast<uint8_t>(at);
  submit(r);
}

void census(const char* state, const char* why) {
  Record r = make(Type::census, now());
  r.v[0] = ptr_value(state);
  r.v[1] = ptr_value(why);
  submit(r);
}

void budget(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  const DeviceLedger& l = ledger();
  uint64_t limit = l.limit(device);
  if (limit == 0) return;  // no budget known for this device: nothing to say
  int64_t t = now();
  int64_t last = g_budget_last[device].load(std::memory_order_relaxed);
  if ((last == 0 || t - (last - 1) >= kBudgetPeriodNs) &&
      g_budget_last[device].compare_exchange_strong(last, t + 1, std::memory_order_relaxed)) {
    g_budget_dirty[device].store(false, std::memory_order_relaxed);
    Record r = make(Type::budget, t, device);
    r.v[0] = limit;
    r.v[1] = l.used(device);
    r.v[2] = l.resident(device);
    submit(r);
    return;
  }
  g_budget_dirty[device].store(true, std::memory_order_relaxed);
}

void host_registered(uintptr_t ptr, uint64_t bytes, uint64_t dur_ns, const char* result, const char* why) {
  Record r = make(Type::host_register, now() - static_cast<int64_t>(dur_ns));
  r.v[0] = ptr;
  r.v[1] = bytes;
  r.v[2] = dur_ns;
  r.v[3] = ptr_value(result);
  r.v[4] = ptr_value(why);
  submit(r);
}

void host_unregistered(uintptr_t ptr, uint64_t bytes, uint64_t dur_ns, const char* why) {
  Record r = make(Type::host_unregister, now() - static_cast<int64_t>(dur_ns));
  r.v[0] = ptr;
  r.v[1] = bytes;
  r.v[2] = dur_ns;
  r.v[3] = ptr_value(why);
  submit(r);
}

void cache_totals(uint64_t hits, uint64_t misses, uint64_t evictions, uint64_t invalidations, uint64_t bytes) {
  Record r = make(Type::cache, now());
  r.v[0] = hits;
  r.v[1] = misses;
  r.v[2] = evictions;
  r.v[3] = invalidations;
  r.v[4] = bytes;
  submit(r);
}

}  // namespace gms::trace
