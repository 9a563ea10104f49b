// What the trace needs from CUDA: the devices of the header (through the real driver) and CUPTI's
// activity records (kernels, copies, memsets, unified-memory counters, NVTX ranges).
//
// libcupti is loaded with dlopen (RTLD_LOCAL) when the trace starts, that is at the first event,
// when the program has already initialised CUDA itself: the shim never initialises the driver on
// the program's behalf (a parent that did would break CUDA in its fork children). Every CUPTI
// function is reached through a pointer typed from the CUPTI headers; nothing links libcupti.
// Missing or refusing CUPTI: the header's "cupti" says why, the shim's own events are still traced.
#include "cuda_backend.h"

// The shim's view of cuda.h first (every implementation under its literal name), then CUPTI's
// types on top of it.
#include "driver/cuda_driver.h"

#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "core/guard.h"
#include "core/log.h"
#include "core/runtime.h"
#include "driver/budget.h"
#include "driver/libc.h"
#include "gms/build_config.h"
#include "names.h"
#include "out.h"
#include "record.h"
#include "trace.h"

namespace gms::trace {
namespace {

// ---- libcupti ----

#define GMS_CUPTI_FUNCTIONS(X)                \
  X(cuptiActivityRegisterCallbacks)           \
  X(cuptiActivityEnable)                      \
  X(cuptiActivityConfigureUnifiedMemoryCounter) \
  X(cuptiActivityGetNextRecord)               \
  X(cuptiActivityGetNumDroppedRecords)        \
  X(cuptiActivityFlushAll)                    \
  X(cuptiGetTimestamp)                        \
  X(cuptiGetResultString)                     \
  X(cuptiGetVersion)

struct Cupti {
#define GMS_X(name) decltype(&::name) name = nullptr;
  GMS_CUPTI_FUNCTIONS(GMS_X)
#undef GMS_X
};

Cupti g_cupti;
enum class CuptiState { never, on, off, parent_owned };
CuptiState g_cupti_state = CuptiState::never;
pid_t g_cupti_pid = 0;
int64_t g_cupti_offset = 0;  // CLOCK_MONOTONIC minus CUPTI's clock, measured once
constexpr int kMaxMissing = 8;
const char* g_missing[kMaxMissing];  // optional activity kinds CUPTI refused
char g_missing_text[kMaxMissing][96];
int g_missing_count = 0;
char g_reason[256];
char g_nvtx_path[1024];  // the NVTX_INJECTION64_PATH the shim set at load ("" if it set none)

constexpr int kCudaMajor = CUDA_VERSION / 1000;
constexpr size_t kBufferBytes = 4 * 1024 * 1024;

const char* cupti_soname() {
  static char name[32];
  Line l;
  l.str("libcupti.so.").i64(kCudaMajor);
  std::memcpy(name, l.data(), l.size() + 1);
  return name;
}

bool readable(const char* path) { return access(path, R_OK) == 0; }

// The libcupti file that a plain search would find first among the places the shim knows:
// LD_LIBRARY_PATH, then the CUDA toolkit the shim was built with.
bool find_cupti_file(char* out, size_t size) {
  const char* soname = cupti_soname();
  const char* ld_path = env_value(Env::ld_library_path);
  auto try_dir = [&](const char* dir, size_t n) {
    if (n == 0) return false;
    Line l;
    l.str(dir, n).chr('/').str(soname);
    if (l.size() + 1 > size || !readable(l.data())) return false;
    std::memcpy(out, l.data(), l.size() + 1);
    return true;
  };
  for (const char* p = ld_path; p && *p;) {
    const char* colon = std::strchr(p, ':');
    size_t n = colon ? static_cast<size_t>(colon - p) : std::strlen(p);
    if (try_dir(p, n)) return true;
    if (!colon) break;
    p = colon + 1;
  }
  static const char* const kDirs[] = {GMS_CUDA_LIBRARY_DIR, GMS_CUDA_LIBRARY_DIR "/../extras/CUPTI/lib64",
                                      "/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64"};
  for (const char* d : kDirs) {
    if (try_dir(d, std::strlen(d))) return true;
  }
  return false;
}

// One copy of libcupti in the process: the one the program already has, the one NVTX is told to
// inject (so that NVTX ranges reach the CUPTI we enable), then the usual names and directories.
void* load_cupti(char* tried, size_t tried_size) {
  Line names;
  void* h = dlopen(cupti_soname(), RTLD_NOW | RTLD_NOLOAD);
  const char* nvtx = env_value(Env::nvtx_injection);
  if (!h && nvtx && std::strstr(nvtx, "libcupti")) {
    h = dlopen(nvtx, RTLD_NOW | RTLD_LOCAL);
    names.str(nvtx);
  }
  auto attempt = [&](const char* dir, const char* file) {
    if (h) return;
    Line path;
    if (dir) path.str(dir).chr('/');
    path.str(file);
    h = dlopen(path.data(), RTLD_NOW | RTLD_LOCAL);
    if (names.size()) names.str(", ");
    names.str(path.data(), path.size());
  };
  attempt(nullptr, cupti_soname());
  attempt(nullptr, "libcupti.so");
  for (const char* dir : {GMS_CUDA_LIBRARY_DIR, GMS_CUDA_LIBRARY_DIR "/../extras/CUPTI/lib64",
                          "/usr/local/cuda/extras/CUPTI/lib64"}) {
    attempt(dir, cupti_soname());
    attempt(dir, "libcupti.so");
  }
  if (!h) (void)dlerror();
  size_t n = names.size() < tried_size - 1 ? names.size() : tried_size - 1;
  std::memcpy(tried, names.data(), n);
  tried[n] = '\0';
  return h;
}

const char* result_name(CUptiResult r) {
  const char* s = nullptr;
  if (g_cupti.cuptiGetResultString && g_cupti.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI_ERROR_UNKNOWN";
}

const char* set_reason(const char* what, CUptiResult r) {
  Line l;
  l.str(what).str(": ").str(result_name(r));
  std::memcpy(g_reason, l.data(), l.size() < sizeof(g_reason) - 1 ? l.size() + 1 : sizeof(g_reason));
  g_reason[sizeof(g_reason) - 1] = '\0';
  return g_reason;
}

void note_missing(const char* what, CUptiResult r) {
  if (g_missing_count == kMaxMissing) return;
  Line l;
  l.str(what).str(": ").str(result_name(r));
  char* slot = g_missing_text[g_missing_count];
  size_t n = l.size() < sizeof(g_missing_text[0]) - 1 ? l.size() : sizeof(g_missing_text[0]) - 1;
  std::memcpy(slot, l.data(), n);
  slot[n] = '\0';
  g_missing[g_missing_count++] = slot;
}

// ---- records ----

int64_t trace_time(uint64_t cupti_ns) {
  return static_cast<int64_t>(cupti_ns) + g_cupti_offset - static_cast<int64_t>(t0_ns());
}

MemcpyKind memcpy_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return MemcpyKind::htod;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return MemcpyKind::dtoh;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return MemcpyKind::dtod;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return MemcpyKind::htoh;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return MemcpyKind::peer;
    default:
      return MemcpyKind::unknown;
  }
}

MemoryKind memory_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return MemoryKind::pageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return MemoryKind::pinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return MemoryKind::device;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return MemoryKind::managed;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return MemoryKind::array;
    default:
      return MemoryKind::unknown;
  }
}

UmCause um_cause(uint32_t flags) {
  switch (flags) {
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER:
      return UmCause::user_prefetch;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE:
      return UmCause::coherence;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH:
      return UmCause::speculative;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION:
      return UmCause::eviction;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_ACCESS_COUNTERS:
      return UmCause::access_counter;
    default:
      return UmCause::unknown;
  }
}

UmAccess um_access(uint32_t flags) {
  switch (flags) {
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_READ:
      return UmAccess::read;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE:
      return UmAccess::write;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_ATOMIC:
      return UmAccess::atomic;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_PREFETCH:
      return UmAccess::prefetch;
    default:
      return UmAccess::unknown;
  }
}

Record record(Type type, uint64_t start, uint64_t end, int device) {
  Record r{};
  r.type = type;
  r.t = trace_time(start);
  r.v[0] = static_cast<uint64_t>(trace_time(end ? end : start));
  r.device = device;
  return r;
}

void on_kernel(const CUpti_ActivityKernel10* k) {
  Record r = record(Type::kernel, k->start, k->end, static_cast<int>(k->deviceId));
  r.v[1] = names::intern(k->name);
  r.v[2] = k->streamId;
  r.v[3] = k->correlationId;
  r.v[4] = static_cast<uint32_t>(k->gridX);
  r.v[5] = static_cast<uint32_t>(k->gridY);
  r.v[6] = static_cast<uint32_t>(k->gridZ);
  r.v[7] = static_cast<uint32_t>(k->blockX);
  r.v[8] = static_cast<uint32_t>(k->blockY);
  r.v[9] = static_cast<uint32_t>(k->blockZ);
  push_from_backend(r);
}

void on_memcpy(const CUpti_ActivityMemcpy6* m) {
  Record r = record(Type::memcpy, m->start, m->end, static_cast<int>(m->deviceId));
  r.v[1] = m->bytes;
  r.v[2] = m->streamId;
  r.v[3] = m->correlationId;
  r.k1 = static_cast<uint8_t>(memcpy_kind(m->copyKind));
  r.k2 = static_cast<uint8_t>(memory_kind(m->srcKind));
  r.k3 = static_cast<uint8_t>(memory_kind(m->dstKind));
  push_from_backend(r);
}

void on_memset(const CUpti_ActivityMemset4* m) {
  Record r = record(Type::memset, m->start, m->end, static_cast<int>(m->deviceId));
  r.v[1] = m->bytes;
  r.v[2] = m->streamId;
  push_from_backend(r);
}

void on_um(const CUpti_ActivityUnifiedMemoryCounter3* u) {
  UmCounter counter = UmCounter::unknown;
  int device = -1;
  bool has_end = true, migration = false, fault = false;
  switch (u->counterKind) {
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
      counter = UmCounter::htod, device = static_cast<int>(u->dstId), migration = true;
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
      counter = UmCounter::dtoh, device = static_cast<int>(u->srcId), migration = true;
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD:
      counter = UmCounter::dtod, device = static_cast<int>(u->dstId), migration = true;
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
      counter = UmCounter::gpu_fault, device = static_cast<int>(u->srcId), fault = true;
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
      counter = UmCounter::cpu_fault, has_end = false;
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING:
      counter = UmCounter::thrashing, has_end = false;  // srcId is a mask of the devices fighting
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING:
      counter = UmCounter::throttling, device = static_cast<int>(u->srcId);
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP:
      counter = UmCounter::remote_map, device = static_cast<int>(u->dstId), has_end = false;
      break;
    default:
      break;
  }
  Record r = record(Type::um, u->start, has_end ? u->end : 0, device);
  r.v[1] = u->address;
  r.v[2] = migration ? u->value : 0;
  r.v[3] = u->value;
  r.k1 = static_cast<uint8_t>(counter);
  r.k2 = migration ? static_cast<uint8_t>(um_cause(u->flags)) : kNone;
  r.k3 = fault ? static_cast<uint8_t>(um_access(u->flags)) : kNone;
  push_from_backend(r);
}

// NVTX: a start (push, or range start) and its end share an id; instantaneous marks are ranges of
// length zero.
struct OpenRange {
  int64_t t;
  uint32_t name, domain;
  uint32_t tid;
};
pthread_mutex_t g_ranges_mu = PTHREAD_MUTEX_INITIALIZER;
std::unordered_map<uint32_t, OpenRange>* g_ranges = nullptr;

void on_marker(const CUpti_ActivityMarker2* m) {
  uint32_t tid = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS
                     ? m->objectId.pt.threadId
                     : 0;
  Record r{};
  r.type = Type::range;
  r.device = -1;
  if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
    OpenRange open{trace_time(m->timestamp), names::intern(m->name), names::intern(m->domain), tid};
    pthread_mutex_lock(&g_ranges_mu);
    if (!g_ranges) g_ranges = new std::unordered_map<uint32_t, OpenRange>();
    (*g_ranges)[m->id] = open;
    pthread_mutex_unlock(&g_ranges_mu);
    return;
  }
  if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
    OpenRange open{};
    bool found = false;
    pthread_mutex_lock(&g_ranges_mu);
    if (g_ranges) {
      auto it = g_ranges->find(m->id);
      if (it != g_ranges->end()) {
        open = it->second;
        g_ranges->erase(it);
        found = true;
      }
    }
    pthread_mutex_unlock(&g_ranges_mu);
    if (!found) return;
    r.t = open.t;
    r.v[0] = static_cast<uint64_t>(trace_time(m->timestamp));
    r.v[1] = open.name;
    r.v[2] = open.domain;
    r.v[3] = open.tid;
    push_from_backend(r);
    return;
  }
  if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
    r.t = trace_time(m->timestamp);
    r.v[0] = static_cast<uint64_t>(r.t);
    r.v[1] = names::intern(m->name);
    r.v[2] = names::intern(m->domain);
    r.v[3] = tid;
    push_from_backend(r);
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  ShimScope scope;  // the shim's memory, not a host block of the program
  *buffer = static_cast<uint8_t*>(std::malloc(kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  ShimScope scope;
  CUpti_Activity* rec = nullptr;
  while (buffer && g_cupti.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        on_kernel(reinterpret_cast<const CUpti_ActivityKernel10*>(rec));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        on_memcpy(reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec));
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        on_memset(reinterpret_cast<const CUpti_ActivityMemset4*>(rec));
        break;
      case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER:
        on_um(reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(rec));
        break;
      case CUPTI_ACTIVITY_KIND_MARKER:
        on_marker(reinterpret_cast<const CUpti_ActivityMarker2*>(rec));
        break;
      default:
        break;
    }
  }
  size_t dropped = 0;
  if (g_cupti.cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped) {
    cupti_dropped(dropped);
  }
  std::free(buffer);
}

// Registered when CUPTI starts, so it runs before the library destructors (libcupti's and
// libcuda's included) and, usually, before the CUDA runtime tears its contexts down.
void flush_at_exit() {
  if (g_cupti_state != CuptiState::on || getpid() != g_cupti_pid) return;
  ShimScope scope;
  g_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

bool configure_um(bool faults) {
  CUpti_ActivityUnifiedMemoryCounterKind kinds[] = {
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP,
  };
  // Everything first; then the migrations (and faults) alone, for drivers that refuse the rest.
  for (size_t basic : {sizeof(kinds) / sizeof(kinds[0]), size_t{4}}) {
    CUpti_ActivityUnifiedMemoryCounterConfig cfg[8] = {};
    uint32_t n = 0;
    for (size_t i = 0; i < basic; ++i) {
      bool is_fault = kinds[i] == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT ||
                      kinds[i] == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT;
      if (is_fault && !faults) continue;
      cfg[n].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
      cfg[n].kind = kinds[i];
      cfg[n].deviceId = 0;
      cfg[n].enable = 1;
      ++n;
    }
    CUptiResult r = g_cupti.cuptiActivityConfigureUnifiedMemoryCounter(cfg, n);
    if (r == CUPTI_SUCCESS) {
      if (basic != sizeof(kinds) / sizeof(kinds[0])) {
        note_missing("unified memory dtod/thrashing/throttling/remote_map", CUPTI_ERROR_NOT_SUPPORTED);
      }
      return true;
    }
    if (basic == 4) note_missing("cuptiActivityConfigureUnifiedMemoryCounter", r);
  }
  return false;
}

const char* start_cupti(bool faults) {
  if (g_cupti_state == CuptiState::on) return "ok";
  if (g_cupti_state == CuptiState::parent_owned) {
    return "not started in a fork child (CUPTI belongs to the parent process)";
  }
  if (g_cupti_state == CuptiState::off) return g_reason;
  g_cupti_state = CuptiState::off;
  if (!driver::libcuda_handle()) {
    std::strcpy(g_reason, "no CUDA driver");
    return g_reason;
  }
  char tried[512];
  void* h = load_cupti(tried, sizeof(tried));
  if (!h) {
    Line l;
    l.str("libcupti not found (tried ").str(tried).str(")");
    std::memcpy(g_reason, l.data(), l.size() < sizeof(g_reason) - 1 ? l.size() + 1 : sizeof(g_reason));
    g_reason[sizeof(g_reason) - 1] = '\0';
    return g_reason;
  }
  bool all = true;
#define GMS_X(name)                                                                  \
  g_cupti.name = reinterpret_cast<decltype(g_cupti.name)>(libc::dlsym(h, #name));   \
  all = all && g_cupti.name;
  GMS_CUPTI_FUNCTIONS(GMS_X)
#undef GMS_X
  if (!all) {
    std::strcpy(g_reason, "libcupti lacks a function the shim needs (too old?)");
    return g_reason;
  }
  CUptiResult r = g_cupti.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) return set_reason("cuptiActivityRegisterCallbacks", r);
  // Kernels and copies are what CUPTI is for here: without them it is off. The rest is optional.
  r = g_cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) return set_reason("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
  r = g_cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  if (r != CUPTI_SUCCESS) return set_reason("cuptiActivityEnable(MEMCPY)", r);
  if ((r = g_cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET)) != CUPTI_SUCCESS) note_missing("MEMSET", r);
  if (configure_um(faults) &&
      (r = g_cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)) != CUPTI_SUCCESS) {
    note_missing("UNIFIED_MEMORY_COUNTER", r);
  }
  if ((r = g_cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER)) != CUPTI_SUCCESS) note_missing("MARKER", r);
  // CUPTI's clock against the trace's: read it between two reads of CLOCK_MONOTONIC.
  uint64_t c = 0;
  uint64_t m1 = monotonic_ns();
  g_cupti.cuptiGetTimestamp(&c);
  uint64_t m2 = monotonic_ns();
  g_cupti_offset = static_cast<int64_t>(m1 + (m2 - m1) / 2) - static_cast<int64_t>(c);
  g_cupti_pid = getpid();
  g_cupti_state = CuptiState::on;
  // The program may have loaded another libcupti by now (PyTorch's own, found by soname): NVTX must
  // inject that one, which is the one enabled here. Its first NVTX call has usually not come yet.
  Dl_info info{};
  if (g_nvtx_path[0] && dladdr(reinterpret_cast<void*>(g_cupti.cuptiActivityEnable), &info) && info.dli_fname &&
      std::strcmp(info.dli_fname, g_nvtx_path) != 0 && info.dli_fname[0] == '/') {
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 1);
  }
  atexit(flush_at_exit);
  return "ok";
}

void flush_cupti(bool force) {
  if (g_cupti_state != CuptiState::on || getpid() != g_cupti_pid) return;
  g_cupti.cuptiActivityFlushAll(force ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void forked_child() {
  if (g_cupti_state == CuptiState::on) g_cupti_state = CuptiState::parent_owned;
  pthread_mutex_init(&g_ranges_mu, nullptr);
}

void header_extra(Out& out) {
  if (g_cupti_state == CuptiState::on && g_cupti.cuptiGetVersion) {
    uint32_t v = 0;
    if (g_cupti.cuptiGetVersion(&v) == CUPTI_SUCCESS) out.key("cupti_version").u64(v);
  }
  if (g_missing_count == 0) return;
  out.key("cupti_missing").chr('[');
  for (int i = 0; i < g_missing_count; ++i) {
    if (i) out.chr(',');
    out.str(g_missing[i]);
  }
  out.chr(']');
}

// ---- the header's devices ----

template <typename F>
F driver_fn(const char* name) {
  void* h = driver::libcuda_handle();
  return h ? reinterpret_cast<F>(libc::dlsym(h, name)) : nullptr;
}

// PCIe generation and width from sysfs ("16.0 GT/s PCIe" -> 4): each generation doubles the rate.
bool pcie_link(int domain, int bus, int device, int* gen, int* width) {
  auto read_line = [](const char* path, char* buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    return true;
  };
  Line dir;
  dir.str("/sys/bus/pci/devices/").hex_digits(static_cast<uint64_t>(domain), 4).chr(':');
  dir.hex_digits(static_cast<uint64_t>(bus), 2).chr(':').hex_digits(static_cast<uint64_t>(device), 2);
  dir.str(".0/");
  Line speed_path, width_path;
  speed_path.str(dir.data(), dir.size()).str("current_link_speed");
  width_path.str(dir.data(), dir.size()).str("current_link_width");
  char speed[64], w[16];
  if (!read_line(speed_path.data(), speed, sizeof(speed)) || !read_line(width_path.data(), w, sizeof(w))) return false;
  double gts = std::atof(speed);
  static const double kRates[] = {2.5, 5, 8, 16, 32, 64, 128};
  *gen = 0;
  for (int i = 0; i < 7; ++i) {
    if (gts > kRates[i] * 0.9 && gts < kRates[i] * 1.1) *gen = i + 1;
  }
  *width = std::atoi(w);
  return *gen > 0 && *width > 0;
}

void describe(Out& out) {
  auto version = driver_fn<PFN_cuDriverGetVersion_v2020>("cuDriverGetVersion");
  auto count_fn = driver_fn<PFN_cuDeviceGetCount_v2000>("cuDeviceGetCount");
  auto name_fn = driver_fn<PFN_cuDeviceGetName_v2000>("cuDeviceGetName");
  auto total_fn = driver_fn<PFN_cuDeviceTotalMem_v3020>("cuDeviceTotalMem_v2");
  auto attr = driver_fn<PFN_cuDeviceGetAttribute_v2000>("cuDeviceGetAttribute");
  int v = 0;
  if (version && version(&v) == CUDA_SUCCESS) out.key("driver_version").i64(v);
  out.key("cuda_version").i64(CUDA_VERSION);
  out.key("devices").chr('[');
  int count = 0;
  if (!count_fn || count_fn(&count) != CUDA_SUCCESS) count = 0;
  for (int i = 0; i < count && i < DeviceLedger::kMaxDevices; ++i) {
    CUdevice dev = i;  // a device handle is its ordinal (as the shim's placement code assumes too)
    char name[256] = "";
    if (name_fn) name_fn(name, sizeof(name), dev);
    size_t total = 0;
    if (total_fn) total_fn(&total, dev);
    if (i) out.chr(',');
    out.raw("{\"index\":").i64(i).raw(",\"name\":").str(name).raw(",\"total_bytes\":").u64(total);
    out.raw(",\"budget_bytes\":").u64(budget::of(i, total));
    int domain = 0, bus = 0, slot = 0, gen = 0, width = 0;
    if (attr && attr(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) == CUDA_SUCCESS &&
        attr(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) == CUDA_SUCCESS &&
        attr(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) == CUDA_SUCCESS && (domain | bus | slot) != 0 &&
        pcie_link(domain, bus, slot, &gen, &width)) {
      out.raw(",\"pcie_gen\":").i64(gen).raw(",\"pcie_width\":").i64(width);
    }
    out.chr('}');
  }
  out.chr(']');
}

const Backend kBackend = {start_cupti, describe, header_extra, flush_cupti, forked_child};

}  // namespace

const char* cuda_error_name(int result) {
  auto name_fn = driver_fn<PFN_cuGetErrorName_v6000>("cuGetErrorName");
  const char* s = nullptr;
  if (name_fn && name_fn(static_cast<CUresult>(result), &s) == CUDA_SUCCESS && s) return s;
  return "CUDA_ERROR_UNKNOWN";
}

void attach_cuda_backend() {
  ShimScope scope;
  set_backend(&kBackend);
  if (!configured()) return;
  // NVTX reaches CUPTI only through its injection hook, read from the environment at the
  // program's first NVTX call: point it at the libcupti that the trace will load.
  if (env_value(Env::nvtx_injection)) return;
  if (find_cupti_file(g_nvtx_path, sizeof(g_nvtx_path))) {
    setenv("NVTX_INJECTION64_PATH", g_nvtx_path, 0);
  } else {
    g_nvtx_path[0] = '\0';
  }
}

}  // namespace gms::trace
