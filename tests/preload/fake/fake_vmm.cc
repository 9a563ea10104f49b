// The stand-in driver's virtual memory management: reservations, cuMemCreate handles (memfd
// memory), their mappings (blocks of kind vmm), access, and the stream waits that gate it.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fake_internal.h"

using namespace fake_internal;

// ---- virtual memory management --------------------------------------------------------------------------

namespace {

constexpr size_t kGranularity = 2ull << 20;

struct Reservation {
  size_t size;
};
struct VmmHandle {
  int fd;
  size_t size;
  bool host = false;  // host-located (CU_MEM_LOCATION_TYPE_HOST / HOST_NUMA)
  unsigned types = 0;  // requestedHandleTypes
  int refs = 1;       // cuMemRetainAllocationHandle adds one, cuMemRelease takes one
};

// Leaked on purpose: they must outlive every static destructor that might still call the driver.
std::map<uintptr_t, Reservation>& reservations() {
  static auto* m = new std::map<uintptr_t, Reservation>;
  return *m;
}
std::map<unsigned long long, VmmHandle>& vmm_handles() {
  static auto* m = new std::map<unsigned long long, VmmHandle>;
  return *m;
}

std::atomic<int> g_fail_device_creates{0};

}  // namespace

FAKE_EXPORT void fake_cuda_fail_device_creates(int n) { g_fail_device_creates.store(n); }

FAKE_IMPL(cuMemGetAllocationGranularity)(size_t* g, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags) {
  FAKE_ENTER(k_cuMemGetAllocationGranularity);
  FAKE_TRY(need_init());
  if (!g || !prop) return CUDA_ERROR_INVALID_VALUE;
  *g = kGranularity;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemAddressReserve)(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr, unsigned long long) {
  FAKE_ENTER(k_cuMemAddressReserve);
  FAKE_TRY(need_ctx());
  if (!ptr || size == 0 || size % kGranularity) return CUDA_ERROR_INVALID_VALUE;
  void* p = raw_mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  reservations()[reinterpret_cast<uintptr_t>(p)] = Reservation{size};
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemAddressFree)(CUdeviceptr ptr, size_t size) {
  FAKE_ENTER(k_cuMemAddressFree);
  FAKE_TRY(need_ctx());
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = reservations().find(static_cast<uintptr_t>(ptr));
    if (it == reservations().end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
    reservations().erase(it);
  }
  raw_munmap(dp(ptr), size);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemCreate)(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                       unsigned long long flags) {
  FAKE_ENTER(k_cuMemCreate);
  FAKE_TRY(need_ctx());
  if (!handle || !prop || flags != 0 || size == 0 || size % kGranularity || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && g_fail_device_creates.load() > 0) {
    g_fail_device_creates.fetch_sub(1);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  long fd = syscall(SYS_memfd_create, "fakecuda-vmm", 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (syscall(SYS_ftruncate, fd, static_cast<long>(size)) != 0) {
    syscall(SYS_close, fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  unsigned long long h = 0x4d000000ull + static_cast<unsigned long long>(fd);
  std::lock_guard<std::mutex> lock(g_mu);
  const bool host = prop->location.type == CU_MEM_LOCATION_TYPE_HOST || prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
  vmm_handles()[h] = VmmHandle{static_cast<int>(fd), size, host, static_cast<unsigned>(prop->requestedHandleTypes)};
  *handle = h;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemRetainAllocationHandle)(CUmemGenericAllocationHandle* handle, void* addr) {
  FAKE_ENTER(k_cuMemRetainAllocationHandle);
  FAKE_TRY(need_ctx());
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  const auto at = reinterpret_cast<uintptr_t>(addr);
  auto it = blocks().upper_bound(at);
  if (it == blocks().begin()) return CUDA_ERROR_INVALID_VALUE;
  const Block& b = std::prev(it)->second;
  if (b.kind != Kind::vmm || at >= b.base + b.size) return CUDA_ERROR_INVALID_VALUE;
  auto h = vmm_handles().find(0x4d000000ull + static_cast<unsigned long long>(b.fd));
  if (h == vmm_handles().end()) return CUDA_ERROR_INVALID_VALUE;
  ++h->second.refs;
  *handle = h->first;
  return CUDA_SUCCESS;
}

FAKE_EXPORT unsigned fake_cuda_handle_types(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = vmm_handles().find(handle);
  return it == vmm_handles().end() ? 0 : it->second.types;
}

FAKE_EXPORT int fake_cuda_handle_on_host(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = vmm_handles().find(handle);
  return it == vmm_handles().end() ? -1 : it->second.host ? 1 : 0;
}

FAKE_IMPL(cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                    unsigned long long flags) {
  FAKE_ENTER(k_cuMemMap);
  FAKE_TRY(need_ctx());
  if (flags != 0 || size == 0 || size % kGranularity || offset % kGranularity) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto h = vmm_handles().find(handle);
  if (h == vmm_handles().end() || offset + size > h->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto base = static_cast<uintptr_t>(ptr);
  auto r = reservations().upper_bound(base);
  if (r == reservations().begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (base < r->first || base + size > r->first + r->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto& m = blocks();
  auto it = m.upper_bound(base + size - 1);
  if (it != m.begin() && std::prev(it)->second.base + std::prev(it)->second.size > base) return CUDA_ERROR_INVALID_VALUE;
  if (!raw_mmap(dp(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, h->second.fd, static_cast<off_t>(offset))) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  m[base] = Block{base, size, 0, Kind::vmm, h->second.fd, offset};
  return CUDA_SUCCESS;
}

// A kernel on a GPU reaches the memory mapped at an address when it runs, whatever is mapped there
// later: a second mapping of that memory (kept, so it stays valid after an unmap or release).
FAKE_EXPORT void* fake_cuda_physical(CUdeviceptr ptr, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto at = static_cast<uintptr_t>(ptr);
  auto it = blocks().upper_bound(at);
  if (it == blocks().begin()) return nullptr;
  const Block& b = std::prev(it)->second;
  if (b.kind != Kind::vmm || at + n > b.base + b.size) return nullptr;
  const size_t from = b.offset + (at - b.base), page = from / kGranularity * kGranularity;
  void* p = raw_mmap(nullptr, from - page + n, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, static_cast<off_t>(page));
  return p ? static_cast<unsigned char*>(p) + (from - page) : nullptr;
}

namespace {

// The host word the latest cuStreamWaitValue32 waited on, and the access calls made while it was
// not 0 (fake_cuda_access_calls_gated).
std::atomic<uintptr_t> g_waited_word{0};
std::atomic<unsigned long> g_access_gated{0};

}  // namespace

FAKE_EXPORT unsigned long fake_cuda_access_calls_gated() { return g_access_gated.load(); }

namespace {

CUresult wait_value(CUdeviceptr addr, unsigned int flags) {
  FAKE_TRY(need_ctx());
  Block b;
  // Work runs at once here: the wait has nothing to wait for. The word must be one a GPU can read.
  if (flags != CU_STREAM_WAIT_VALUE_EQ || !find_block(static_cast<uintptr_t>(addr), 4, &b) || b.kind != Kind::pinned) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  g_waited_word.store(static_cast<uintptr_t>(addr));
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_IMPL(cuStreamWaitValue32_v2)(CUstream, CUdeviceptr addr, cuuint32_t, unsigned int flags) {
  FAKE_ENTER(k_cuStreamWaitValue32_v2);
  return wait_value(addr, flags);
}

FAKE_IMPL(cuStreamWaitValue32_v2_ptsz)(CUstream, CUdeviceptr addr, cuuint32_t, unsigned int flags) {
  FAKE_ENTER(k_cuStreamWaitValue32_v2_ptsz);
  return wait_value(addr, flags);
}

FAKE_IMPL(cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count_) {
  FAKE_ENTER(k_cuMemSetAccess);
  FAKE_TRY(need_ctx());
  if (const uintptr_t w = g_waited_word.load(); w && __atomic_load_n(reinterpret_cast<const uint32_t*>(w), __ATOMIC_SEQ_CST) != 0) {
    ++g_access_gated;
  }
  if (!desc || count_ == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  // As the driver: the range may span several mappings, back to back, but no unmapped byte.
  std::lock_guard<std::mutex> lock(g_mu);
  uintptr_t at = static_cast<uintptr_t>(ptr), end = at + size;
  while (at < end) {
    auto it = blocks().upper_bound(at);
    if (it == blocks().begin()) return CUDA_ERROR_INVALID_VALUE;
    const Block& b = std::prev(it)->second;
    if (b.kind != Kind::vmm || at < b.base || at >= b.base + b.size) return CUDA_ERROR_INVALID_VALUE;
    at = b.base + b.size;
  }
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemUnmap)(CUdeviceptr ptr, size_t size) {
  FAKE_ENTER(k_cuMemUnmap);
  FAKE_TRY(need_ctx());
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = blocks().find(static_cast<uintptr_t>(ptr));
    if (it == blocks().end() || it->second.kind != Kind::vmm || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
    blocks().erase(it);
  }
  // Back to a reserved, inaccessible range.
  raw_mmap(dp(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemRelease)(CUmemGenericAllocationHandle handle) {
  FAKE_ENTER(k_cuMemRelease);
  FAKE_TRY(need_ctx());
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = vmm_handles().find(handle);
    if (it == vmm_handles().end()) return CUDA_ERROR_INVALID_VALUE;
    if (--it->second.refs > 0) return CUDA_SUCCESS;
    fd = it->second.fd;
    vmm_handles().erase(it);
  }
  syscall(SYS_close, fd);  // mappings made from it stay valid until unmapped, as with the real driver
  return CUDA_SUCCESS;
}
