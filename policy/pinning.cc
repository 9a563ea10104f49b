#include "pinning.h"

namespace gms::policy {
namespace {

double seconds(uint64_t bytes, double gbps) { return static_cast<double>(bytes) / (gbps * 1e9); }

double pageable_seconds(const CopyCosts& c, uint64_t bytes) {
  return seconds(bytes, bytes <= c.small_copy_bytes ? c.pageable_small_gbps : c.pageable_large_gbps);
}

}  // namespace

const char* copy_path_name(CopyPath p) {
  switch (p) {
    case CopyPath::driver:
      return "driver";
    case CopyPath::registered:
      return "registered";
    case CopyPath::register_block:
      return "register";
    case CopyPath::staged:
      return "staged";
  }
  return "?";
}

CopyPath choose_copy_path(const CopyCosts& c, RegisterMode mode, const CopyRequest& r) {
  if (r.block_registered) return CopyPath::registered;
  double best = pageable_seconds(c, r.bytes);
  CopyPath path = CopyPath::driver;
  if (r.may_stage && r.bytes >= c.stage_min_bytes) {
    double staged = seconds(r.bytes, r.bytes <= c.small_copy_bytes ? c.staged_small_gbps : c.staged_large_gbps);
    if (staged < best) best = staged, path = CopyPath::staged;
  }
  if (mode != RegisterMode::off && r.block_known && r.fits_cache) {
    if (mode == RegisterMode::always) return CopyPath::register_block;
    // Touched pages register fast; a destination block never copied into may be fresh memory.
    bool touched = r.host_is_source || r.earlier_copies > 0;
    double reg = c.register_fixed_us * 1e-6 +
                 seconds(r.block_bytes, touched ? c.register_touched_gbps : c.register_untouched_gbps);
    // A block copied again and again is likely to be copied again: its registration is spread
    // over the copies seen so far, this one included. A pool block's registration outlives its
    // owner, so it is spread over the next few owners' copies as well:
    // - at once for a copy out of a block of 16 to 64 MiB: its pages are touched (2 ms for
    //   40 MB) and staging runs at only 20 GB/s there; a tensor uploaded again and again, as in
    //   S2, runs at pinned speed from its second copy. Below 16 MiB a first copy costs about as
    //   much registered as staged (4 MiB: 124 us to register), and a model's parameters moved to
    //   the device once each would be registered for nothing. Larger ones stage at 33 GB/s or more:
    //   registering them at once would lose 46 ms per GiB on this copy for owners that may
    //   never come (numba's to_device of four fresh 1 GiB arrays: 24 GB/s, staged 28 to 33);
    // - for a copy into the block once it has come back and been copied into again (.cpu(),
    //   asnumpy() into a new buffer each time, where the driver and staging both pay the first
    //   touch of every page). A fresh destination may never come back, and registering its
    //   untouched pages costs ten times a staged copy.
    double copies = 1.0 + r.earlier_copies;
    bool for_owners = r.host_is_source ? r.block_bytes >= c.upload_for_owners_min && r.block_bytes <= c.small_copy_bytes
                                       : r.earlier_copies > 0;
    if (r.recycled && for_owners && copies < c.recycled_copies) copies = c.recycled_copies;
    double registered = reg / copies + seconds(r.bytes, c.pinned_gbps);
    if (registered < best) path = CopyPath::register_block;
  }
  return path;
}

bool RegistrationCache::touch(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  lru_.splice(lru_.end(), lru_, it->second);
  return true;
}

std::vector<uint64_t> RegistrationCache::insert(uint64_t key, uint64_t bytes) {
  std::vector<uint64_t> evicted;
  if (bytes > limit_) return evicted;
  erase(key);
  while (used_ + bytes > limit_ && !lru_.empty()) {
    Entry e = lru_.front();
    lru_.pop_front();
    index_.erase(e.key);
    used_ -= e.bytes;
    evicted.push_back(e.key);
  }
  lru_.push_back(Entry{key, bytes});
  index_[key] = std::prev(lru_.end());
  used_ += bytes;
  return evicted;
}

uint64_t RegistrationCache::erase(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return 0;
  uint64_t b = it->second->bytes;
  used_ -= b;
  lru_.erase(it->second);
  index_.erase(it);
  return b;
}

}  // namespace gms::policy
