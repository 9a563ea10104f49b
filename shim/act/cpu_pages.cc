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

// The descriptor and the process it reads, packed so that one load sees both: a fork child finds
// its parent's pid there and opens its own. No lock, so nothing to reset after fork.
std::atomic<uint64_t> g_fd_pid{0};  // (fd + 1) << 32 | pid; 0: none
std::atomic<bool> g_failed{false};   // cannot be read here (said once)

int pagemap() {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  uint64_t seen = g_fd_pid.load(std::memory_order_acquire);
  if (seen != 0 && static_cast<uint32_t>(seen) == pid) return static_cast<int>(seen >> 32) - 1;
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (!g_failed.exchange(true)) {
      log(LogLevel::debug, Line().str("cannot read /proc/self/pagemap: CPU turns on managed memory are not seen"));
    }
    return -1;
  }
  const uint64_t mine = (static_cast<uint64_t>(fd) + 1) << 32 | pid;
  if (g_fd_pid.compare_exchange_strong(seen, mine, std::memory_order_acq_rel)) {
    // A parent's descriptor inherited by a fork child is the child's to close.
    if (seen != 0) close(static_cast<int>(seen >> 32) - 1);
    return fd;
  }
  close(fd);  // another thread opened it first
  return static_cast<uint32_t>(seen) == pid ? static_cast<int>(seen >> 32) - 1 : -1;
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

bool read_cpu_pages(uintptr_t base, uint64_t pages, uint64_t* bits) {
  const int fd = pagemap();
  if (fd < 0 || base % kPage != 0) return false;
  // 4 KiB of entries a read: a 256 MiB region is 128 reads.
  constexpr uint64_t kBatch = 512;
  uint64_t entries[kBatch];
  for (uint64_t done = 0; done < pages; done += kBatch) {
    const uint64_t n = pages - done < kBatch ? pages - done : kBatch;
    const off_t at = static_cast<off_t>((base / kPage + done) * sizeof(uint64_t));
    const ssize_t want = static_cast<ssize_t>(n * sizeof(uint64_t));
    if (pread(fd, entries, static_cast<size_t>(want), at) != want) return false;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t page = done + i;
      const uint64_t bit = 1ull << (page % 64);
      if (entries[i] & kPresent) bits[page / 64] |= bit;
      else bits[page / 64] &= ~bit;
    }
  }
  return true;
}

bool cpu_pages_follow_managed(int device) {
  static std::once_flag once;
  static bool follows = false;
  std::call_once(once, [device] {
    using driver::call_real;
    // The CPU may touch managed memory while kernels run only with concurrent managed access
    // (not on WSL or before Pascal, where the touch below would fault): without it, nothing is watched.
    int concurrent = 0;
    if (call_real(GMS_REAL(cuDeviceGetAttribute), &concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                  static_cast<CUdevice>(device)) != CUDA_SUCCESS ||
        concurrent == 0) {
      return;
    }
    // Allowed to this thread while another captures in global mode, which would forbid the
    // allocation and the synchronisation (and be invalidated by them).
    driver::RelaxedCapture relaxed;
    // A stream of the shim's own that waits for nothing of the program's: synchronising it cannot
    // end a capture or wait for a kernel that never ends. Kept, like the block, for the process.
    CUstream own = nullptr;
    if (call_real(GMS_REAL(cuStreamCreate), &own, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) return;
    constexpr uint64_t kBytes = 2ull << 20;
    CUdeviceptr p = 0;
    if (call_real(GMS_REAL(cuMemAllocManaged), &p, kBytes, static_cast<unsigned>(CU_MEM_ATTACH_GLOBAL)) != CUDA_SUCCESS) return;
    auto* bytes = reinterpret_cast<volatile unsigned char*>(p);
    for (uint64_t off = 0; off < kBytes; off += kPage) bytes[off] = 1;
    const PageSample written = sample_cpu_pages(p, kBytes, 8);
    const CUmemLocation gpu{CU_MEM_LOCATION_TYPE_DEVICE, device};
    PageSample moved;
    if (call_real(GMS_REAL(cuMemPrefetchAsync_v2), p, kBytes, gpu, 0u, own) == CUDA_SUCCESS &&
        call_real(GMS_REAL(cuStreamSynchronize), own) == CUDA_SUCCESS) {
      moved = sample_cpu_pages(p, kBytes, 8);
    }
    // Not freed: cuMemFree may wait for the whole device.
    follows = written.samples > 0 && written.cpu == written.samples && moved.samples > 0 && moved.cpu == 0;
    Line l;
    l.str(follows ? "the page table follows managed memory: the CPU's turns on it are watched"
                  : "the page table does not follow managed memory here: the CPU's turns on it are not watched");
    log(LogLevel::debug, l);
  });
  return follows;
}

}  // namespace gms::act
