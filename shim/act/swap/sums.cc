#include "sums.h"

#include <algorithm>
#include <vector>

#include "act/swap/sum_mix.h"
#include "core/log.h"

namespace gms::act::swap {

extern const char kSumsPtx[];  // sums_ptx.cc, generated from sums.cu

using driver::call_real;

namespace {

constexpr int kSlotsPerBlock = 1024;  // 512 KiB of device memory and as much pinned host memory
constexpr uint64_t kSlotWords = 2 * sum::kMaxPieces;  // two lanes a piece

struct Block {
  CUdeviceptr device = 0;
  uint64_t* host = nullptr;
};

struct DeviceSums {
  bool tried = false;
  CUfunction fn = nullptr;
  unsigned blocks = 0;  // the grid: a few blocks a multiprocessor
  std::vector<Block> slots;
  std::vector<int> free;
};

DeviceSums g_sums[kMaxDevices];

bool load(DeviceSums& d, int dev) {
  if (kSumsPtx[0] == '\0') return false;
  CUmodule m = nullptr;
  CUresult r = call_real(GMS_REAL(cuModuleLoadData), &m, static_cast<const void*>(kSumsPtx));
  if (r == CUDA_SUCCESS) r = call_real(GMS_REAL(cuModuleGetFunction), &d.fn, m, sum::kKernel);
  int sms = 0;
  if (r == CUDA_SUCCESS) {
    r = call_real(GMS_REAL(cuDeviceGetAttribute), &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, static_cast<CUdevice>(dev));
  }
  if (r != CUDA_SUCCESS) {
    d.fn = nullptr;
    Line l;
    l.str("swap: the chunk checksum kernel did not load (CUresult ").i64(r).str("): every eviction copies its chunk out");
    log(LogLevel::info, l);
    return false;
  }
  d.blocks = static_cast<unsigned>(sms > 0 ? 4 * sms : 64);
  return true;
}

}  // namespace

bool sums_ready(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return false;
  DeviceSums& d = g_sums[dev];
  if (!d.tried) {
    d.tried = true;
    load(d, dev);
  }
  return d.fn != nullptr;
}

int take_sum_slot(int dev) {
  // The kernel runs in the current context, which must be the memory's device: a kernel of one
  // device reading VMM memory mapped for another would fault (sticky) rather than fail.
  if (dev != driver::current_device() || !sums_ready(dev)) return -1;
  DeviceSums& d = g_sums[dev];
  if (d.free.empty()) {
    Block b;
    void* h = nullptr;
    if (call_real(GMS_REAL(cuMemAlloc_v2), &b.device, size_t{kSlotsPerBlock} * kSlotWords * 8) != CUDA_SUCCESS) return -1;
    if (call_real(GMS_REAL(cuMemHostAlloc), &h, size_t{kSlotsPerBlock} * kSlotWords * 8, 0u) != CUDA_SUCCESS) {
      call_real(GMS_REAL(cuMemFree_v2), b.device);
      return -1;
    }
    b.host = static_cast<uint64_t*>(h);
    const int first = static_cast<int>(d.slots.size()) * kSlotsPerBlock;
    d.slots.push_back(b);
    for (int k = kSlotsPerBlock - 1; k >= 0; --k) d.free.push_back(first + k);
  }
  const int slot = d.free.back();
  d.free.pop_back();
  return slot;
}

void give_sum_slot(int dev, int slot) {
  if (slot >= 0 && dev >= 0 && dev < kMaxDevices) g_sums[dev].free.push_back(slot);
}

uint64_t new_salt() {
  static uint64_t next = 0;  // under mu()
  return ++next;
}

CUresult queue_sum(int dev, int slot, CUdeviceptr p, uint64_t bytes, uint64_t salt, CUstream stream) {
  if (slot < 0 || !sums_ready(dev)) return CUDA_ERROR_INVALID_VALUE;
  DeviceSums& d = g_sums[dev];
  const Block& b = d.slots[slot / kSlotsPerBlock];
  const int k = slot % kSlotsPerBlock;
  const unsigned pieces = sum::pieces(bytes);
  if (pieces > sum::kMaxPieces) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr out = b.device + static_cast<CUdeviceptr>(k) * kSlotWords * 8;
  CUresult r = call_real(GMS_REAL(cuMemsetD32Async), out, 0u, size_t{4} * pieces, stream);
  unsigned long long n = bytes / 8, piece_words = sum::kPiece / 8;
  unsigned long long s = salt;
  void* params[] = {&p, &n, &out, &s, &piece_words};
  const unsigned across = std::max(1u, d.blocks / pieces);  // the grid's blocks, shared by the pieces
  if (r == CUDA_SUCCESS) {
    r = call_real(GMS_REAL(cuLaunchKernel), d.fn, across, pieces, 1u, sum::kThreads, 1u, 1u, 0u, stream, params,
                  static_cast<void**>(nullptr));
  }
  if (r == CUDA_SUCCESS) {
    r = call_real(GMS_REAL(cuMemcpyDtoHAsync_v2), static_cast<void*>(b.host + kSlotWords * k), out, size_t{16} * pieces, stream);
  }
  return r;
}

const uint64_t* sum_of(int dev, int slot) {
  return g_sums[dev].slots[slot / kSlotsPerBlock].host + kSlotWords * (slot % kSlotsPerBlock);
}

}  // namespace gms::act::swap
