#include "sites.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/guard.h"
#include "gms/build_config.h"
#include "out.h"

namespace gms::trace::sites {
namespace {

struct Site {
  std::atomic<uint64_t> hash{0};  // 0: free; claimed with a CAS
  std::atomic<uint8_t> ready{0};  // frames written
  uint8_t frames = 0;
  bool written = false;           // this file has its `site` line (writer only)
  uintptr_t pc[kMaxFrames] = {};
};

// BSS, untouched until the first capture: constinit, since a member left uninitialised made every
// exec zero these 416 KiB at start-up.
constinit Site g_sites[kCapacity];
uint64_t g_threshold = 0;
using Backtrace = int (*)(void**, int);
Backtrace g_backtrace = nullptr;
uintptr_t g_self_lo = 0, g_self_hi = 0;  // this library's mapped range: its frames are skipped

// Used only when built with libunwind.
[[maybe_unused]] int find_self(dl_phdr_info* info, size_t, void* data) {
  auto self = reinterpret_cast<uintptr_t>(data);
  uintptr_t lo = ~uintptr_t{0}, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + ph.p_vaddr;
    if (a < lo) lo = a;
    if (a + ph.p_memsz > hi) hi = a + ph.p_memsz;
  }
  if (self < lo || self >= hi) return 0;
  g_self_lo = lo;
  g_self_hi = hi;
  return 1;
}

uint64_t hash_frames(const uintptr_t* pc, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) h = (h ^ pc[i]) * 1099511628211ull;
  return h ? h : 1;
}

}  // namespace

void configure(uint64_t threshold) {
  g_threshold = 0;
#if GMS_HAVE_LIBUNWIND
  if (threshold == 0) return;
  if (!g_backtrace) {
    ShimScope scope;
    void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      (void)dlerror();
      return;
    }
    g_backtrace = reinterpret_cast<Backtrace>(dlsym(h, "unw_backtrace"));
    if (!g_backtrace) return;
    dl_iterate_phdr(find_self, reinterpret_cast<void*>(&configure));
  }
  g_threshold = threshold;
#else
  (void)threshold;
#endif
}

uint64_t threshold() { return g_threshold; }

uint32_t capture() {
  if (!g_backtrace) return 0;
  void* raw[kMaxFrames + 16];
  int n = g_backtrace(raw, kMaxFrames + 16);
  int first = 0;
  while (first < n && reinterpret_cast<uintptr_t>(raw[first]) >= g_self_lo &&
         reinterpret_cast<uintptr_t>(raw[first]) < g_self_hi) {
    ++first;
  }
  int count = n - first < kMaxFrames ? n - first : kMaxFrames;
  if (count <= 0) return 0;
  uintptr_t pc[kMaxFrames];
  for (int i = 0; i < count; ++i) pc[i] = reinterpret_cast<uintptr_t>(raw[first + i]);
  uint64_t h = hash_frames(pc, count);
  uint32_t start = static_cast<uint32_t>(h % kCapacity);
  for (uint32_t k = 0; k < kCapacity; ++k) {
    uint32_t i = (start + k) % kCapacity;
    Site& s = g_sites[i];
    uint64_t cur = s.hash.load(std::memory_order_acquire);
    if (cur == 0) {
      if (s.hash.compare_exchange_strong(cur, h, std::memory_order_acq_rel)) {
        std::memcpy(s.pc, pc, sizeof(uintptr_t) * count);
        s.frames = static_cast<uint8_t>(count);
        s.ready.store(1, std::memory_order_release);
        return i + 1;
      }
    }
    if (cur == h) {
      // Another thread may have claimed it a moment ago: its frames are a few stores away.
      while (!s.ready.load(std::memory_order_acquire)) {
      }
      return i + 1;
    }
  }
  return 0;
}

void write_once(Out& out, uint32_t id) {
  if (id == 0 || id > kCapacity) return;
  Site& s = g_sites[id - 1];
  if (s.written || !s.ready.load(std::memory_order_acquire)) return;
  s.written = true;
  ShimScope scope;  // dladdr and the demangler allocate: the shim's memory
  out.open("site").key("id").u64(id).key("frames").chr('[');
  for (int i = 0; i < s.frames; ++i) {
    // A return address: minus one is inside the call, so addr2line names the calling line.
    uintptr_t pc = s.pc[i] - 1;
    Dl_info info{};
    bool found = dladdr(reinterpret_cast<void*>(pc), &info) != 0;
    if (i) out.chr(',');
    out.raw("{\"module\":").str(found ? info.dli_fname : nullptr);
    out.raw(",\"offset\":").addr(found ? pc - reinterpret_cast<uintptr_t>(info.dli_fbase) : pc);
    out.raw(",\"symbol\":");
    if (found && info.dli_sname) {
      int status = 0;
      char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      out.str(status == 0 && demangled ? demangled : info.dli_sname);
      std::free(demangled);
    } else {
      out.raw("null");
    }
    out.chr('}');
  }
  out.chr(']').close();
}

void forget_written() {
  for (Site& s : g_sites) {
    if (s.hash.load(std::memory_order_relaxed) == 0) continue;
    s.written = false;
  }
}

}  // namespace gms::trace::sites
