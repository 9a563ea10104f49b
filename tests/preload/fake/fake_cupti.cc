// A stand-in libcupti.so for the preload tests: the functions the shim's trace takes from CUPTI,
// and unified-memory counter records scripted by the test, handed over at the first flush.
//
// FAKE_CUPTI_UM: records "counter:value:address[:flags]" separated by ';', counter one of htod,
// dtoh, dtod, gpu_fault, cpu_fault, thrashing, throttling, remote_map (value: bytes for
// migrations, thrashing and remote maps; the fault groups for gpu_fault; the faulting
// instruction's address for cpu_fault, as CUPTI gives them).
// As the real CUPTI does, it records nothing about managed memory made before its unified-memory
// counters were enabled: when the stand-in driver had made any by then, no record is handed over.
// FAKE_CUPTI_DROPPED: the count cuptiActivityGetNumDroppedRecords reports.
// FAKE_CUPTI_STARTED: a file made when the activity callbacks are registered (CUPTI started).
#include <cupti.h>
#include <fcntl.h>
#include <unistd.h>
#include <dlfcn.h>
#include <time.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
bool g_um_enabled = false;
bool g_managed_before = false;  // managed memory existed when the counters were enabled
bool g_handed = false;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

unsigned long managed_made() {
  using Calls = unsigned long (*)(const char*);
  auto calls = reinterpret_cast<Calls>(dlsym(RTLD_DEFAULT, "fake_cuda_calls"));
  return calls ? calls("cuMemAllocManaged") : 0;
}

CUpti_ActivityUnifiedMemoryCounterKind counter_of(const std::string& name) {
  static const struct {
    const char* name;
    CUpti_ActivityUnifiedMemoryCounterKind kind;
  } kinds[] = {
      {"htod", CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD},
      {"dtoh", CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH},
      {"dtod", CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD},
      {"gpu_fault", CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT},
      {"cpu_fault", CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT},
      {"thrashing", CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING},
      {"throttling", CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING},
      {"remote_map", CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP},
  };
  for (const auto& k : kinds) {
    if (name == k.name) return k.kind;
  }
  return CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_UNKNOWN;
}

std::vector<CUpti_ActivityUnifiedMemoryCounter3> scripted() {
  std::vector<CUpti_ActivityUnifiedMemoryCounter3> out;
  const char* spec = std::getenv("FAKE_CUPTI_UM");
  if (!spec) return out;
  uint64_t t = now_ns();
  std::string all(spec);
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find(';', start);
    if (end == std::string::npos) end = all.size();
    std::string item = all.substr(start, end - start);
    start = end + 1;
    std::vector<std::string> f;
    for (size_t a = 0, b; a <= item.size(); a = b + 1) {
      b = item.find(':', a);
      if (b == std::string::npos) b = item.size();
      f.push_back(item.substr(a, b - a));
    }
    if (f.size() < 3) continue;
    CUpti_ActivityUnifiedMemoryCounter3 r{};
    r.kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER;
    r.counterKind = counter_of(f[0]);
    r.value = std::strtoull(f[1].c_str(), nullptr, 0);
    r.address = std::strtoull(f[2].c_str(), nullptr, 0);
    r.flags = f.size() > 3 ? static_cast<uint32_t>(std::strtoul(f[3].c_str(), nullptr, 0)) : 0;
    r.start = t;
    r.end = t + 1000;
    r.srcId = 0;
    r.dstId = 0;
    t += 2000;
    out.push_back(r);
  }
  return out;
}

}  // namespace

extern "C" {

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
  g_request = request;
  g_complete = complete;
  if (const char* mark = std::getenv("FAKE_CUPTI_STARTED")) {
    int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) close(fd);
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (kind == CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) {
    g_um_enabled = true;
    g_managed_before = managed_made() > 0;
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityConfigureUnifiedMemoryCounter(CUpti_ActivityUnifiedMemoryCounterConfig*, uint32_t) {
  return CUPTI_SUCCESS;
}

// Every record in the buffers this stand-in fills is a unified-memory counter record.
CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  constexpr size_t kSize = sizeof(CUpti_ActivityUnifiedMemoryCounter3);
  uint8_t* next = *record ? reinterpret_cast<uint8_t*>(*record) + kSize : buffer;
  if (static_cast<size_t>(next - buffer) + kSize > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  const char* d = std::getenv("FAKE_CUPTI_DROPPED");
  *dropped = d ? std::strtoull(d, nullptr, 10) : 0;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t) {
  if (g_handed || !g_um_enabled || g_managed_before || !g_request || !g_complete) return CUPTI_SUCCESS;
  std::vector<CUpti_ActivityUnifiedMemoryCounter3> records = scripted();
  if (records.empty() || managed_made() == 0) return CUPTI_SUCCESS;  // nothing made yet: nothing to record
  g_handed = true;
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&buffer, &size, &max_records);
  const size_t bytes = records.size() * sizeof(records[0]);
  if (!buffer || size < bytes) return CUPTI_ERROR_UNKNOWN;
  std::memcpy(buffer, records.data(), bytes);
  g_complete(nullptr, 0, buffer, size, bytes);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t* t) {
  *t = now_ns();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char** s) {
  *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (stand-in)";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetVersion(uint32_t* v) {
  *v = 130001;
  return CUPTI_SUCCESS;
}

}  // extern "C"
