#pragma once
#include <atomic>
#include <cstdint>

// What counts against each device's budget, kept up to date by core/observe as regions come and
// go: ordinary device allocations and VMM mappings (`used`), managed memory the residency planner
// has prefetched (`resident`), and, process-wide, the managed and pinned memory the shim created
// in place of device memory (`created`, which GPUMEMSHIM_MANAGED_LIMIT caps).
namespace gms {

class DeviceLedger {
 public:
  static constexpr int kMaxDevices = 64;

  void add_used(int dev, uint64_t bytes) { if (ok(dev)) used_[dev].fetch_add(bytes, std::memory_order_relaxed); }
  void sub_used(int dev, uint64_t bytes) { if (ok(dev)) sub(used_[dev], bytes); }
  uint64_t used(int dev) const { return ok(dev) ? used_[dev].load(std::memory_order_relaxed) : 0; }

  void set_resident(int dev, uint64_t bytes) { if (ok(dev)) resident_[dev].store(bytes, std::memory_order_relaxed); }
  uint64_t resident(int dev) const { return ok(dev) ? resident_[dev].load(std::memory_order_relaxed) : 0; }

  void add_created(uint64_t bytes) { created_.fetch_add(bytes, std::memory_order_relaxed); }
  void sub_created(uint64_t bytes) { sub(created_, bytes); }
  uint64_t created() const { return created_.load(std::memory_order_relaxed); }

  // The device's budget in bytes, learned from the driver once (0: not known yet).
  uint64_t limit(int dev) const { return ok(dev) ? limit_[dev].load(std::memory_order_relaxed) : 0; }
  void set_limit(int dev, uint64_t bytes) { if (ok(dev)) limit_[dev].store(bytes, std::memory_order_relaxed); }

  void reset() {
    for (int i = 0; i < kMaxDevices; ++i) used_[i] = 0, resident_[i] = 0, limit_[i] = 0;
    created_ = 0;
  }

 private:
  static bool ok(int dev) { return dev >= 0 && dev < kMaxDevices; }
  static void sub(std::atomic<uint64_t>& a, uint64_t bytes) {
    uint64_t cur = a.load(std::memory_order_relaxed);
    while (!a.compare_exchange_weak(cur, cur >= bytes ? cur - bytes : 0, std::memory_order_relaxed)) {
    }
  }
  std::atomic<uint64_t> used_[kMaxDevices] = {};
  std::atomic<uint64_t> resident_[kMaxDevices] = {};
  std::atomic<uint64_t> limit_[kMaxDevices] = {};
  std::atomic<uint64_t> created_{0};
};

}  // namespace gms
