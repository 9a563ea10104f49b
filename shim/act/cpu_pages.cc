#include "act/cpu_pages.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "core/log.h"
#include "driver/calls.h"

namespace gms::act {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kPresent = 1ull << 63;

std::mutex g_mu;       // guards the descriptor across fork and reopening
int g_fd = -1;
pid_t g_pid = 0;       // the process g_fd reads
bool g_failed = false;  // cannot be read here (said once)

int pagemap() {
  const pid_t pid = getpid();
  std::lock_guard lock(g_mu);
  if (g_fd >= 0 && g_pid == pid) return g_fd;
  if (g_fd >= 0) close(g_fd);  // a fork child: the parent's table
  g_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  g_pid = pid;
  if (g_fd < 0 && !g_failed) {
    g_failed = true;
    log(LogLevel::debug, Line().str("cannot read /proc/self/pagemap: CPU turns on managed memory are not seen"));
  }
  return g_fd;
}

}  // namespace

PageSample sample_cpu_pages(uintptr_t base, uint64_t bytes, uint32_t samples) {
  PageSample s;
  const uint64_t pages = bytes / kPage;
  if (samples == 0 || pages == 0) return s;
  const int fd = pagemap();
  if (fd < 0) return s;
  if (samples > pages) samples = static_cast<uint32_t>(pages);
  for (uint32_t i = 0; i < samples; ++i) {
    // The middle page of each of `samples` equal parts.
    const uint64_t page = base / kPage + (2 * i + 1) * pages / (2 * samples);
    uint64_t entry = 0;
    if (pread(fd, &entry, sizeof(entry), static_cast<off_t>(page * sizeof(entry))) != sizeof(entry)) return PageSample{};
    s.cpu += (entry & kPresent) != 0;
    ++s.samples;
  }
  return s;
}

bool cpu_pages_follow_managed(int device) {
  static std::once_flag once;
  static bool follows = false;
  std::call_once(once, [device] {
    using driver::call_real;
    constexpr uint64_t kBytes = 2ull << 20;
    CUdeviceptr p = 0;
    if (call_real(GMS_REAL(cuMemAllocManaged), &p, kBytes, static_cast<unsigned>(CU_MEM_ATTACH_GLOBAL)) != CUDA_SUCCESS) return;
    auto* bytes = reinterpret_cast<volatile unsigned char*>(p);
    for (uint64_t off = 0; off < kBytes; off += kPage) bytes[off] = 1;
    const PageSample written = sample_cpu_pages(p, kBytes, 8);
    const CUmemLocation gpu{CU_MEM_LOCATION_TYPE_DEVICE, device};
    PageSample moved;
    if (call_real(GMS_REAL(cuMemPrefetchAsync_v2), p, kBytes, gpu, 0u, CUstream{}) == CUDA_SUCCESS &&
        call_real(GMS_REAL(cuStreamSynchronize), CUstream{}) == CUDA_SUCCESS) {
      moved = sample_cpu_pages(p, kBytes, 8);
    }
    call_real(GMS_REAL(cuMemFree_v2), p);
    follows = written.samples > 0 && written.cpu == written.samples && moved.samples > 0 && moved.cpu == 0;
    Line l;
    l.str(follows ? "the page table follows managed memory: the CPU's turns on it are watched"
                  : "the page table does not follow managed memory here: the CPU's turns on it are not watched");
    log(LogLevel::debug, l);
  });
  return follows;
}

}  // namespace gms::act
