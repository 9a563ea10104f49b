#pragma once
// How a copy between pageable host memory and the device should go, and which host blocks stay
// registered (pinned). Pure decisions over plain numbers; shim/act/copy carries them out.
//
// The costs, measured on our H100 (SCENARIOS.md): a pageable copy runs at 7.4 GB/s (1 GiB) to
// 14.4 GB/s (40 MB); a pinned one at 55 GB/s. cudaHostRegister costs 59 ms per GiB of pages already
// touched and 503 ms per GiB of pages never touched; unregistering 1 GiB costs 21 ms; register +
// unregister of 4 MiB, 0.73 ms. So registering pays for a block copied again and again, or for a
// single copy of a large touched block; a one-shot copy into fresh memory is better staged.
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace gms::policy {

struct CopyCosts {
  uint64_t small_copy_bytes = 64ull << 20;  // "small" below: the slower rates of each way
  double pageable_small_gbps = 10.8;  // copies up to 64 MiB
  double pageable_large_gbps = 7.4;
  double pinned_gbps = 55.0;
  // The shim's staged copy, host to device, measured on the H100: 20 GB/s at 40 MB, 33 at 1 GiB.
  double staged_small_gbps = 20.0;
  double staged_large_gbps = 33.0;
  double register_touched_gbps = 18.2;    // 1 GiB in 59 ms
  double register_untouched_gbps = 2.13;  // 1 GiB in 503 ms
  double register_fixed_us = 300;      // per call, whatever the size (0.73 ms for 4 MiB with unregister)
  uint64_t stage_min_bytes = 4ull << 20;  // below this the driver's own staging is as good
  double recycled_copies = 16;  // copies a pool block's registration is expected to serve
  uint64_t upload_for_owners_min = 16ull << 20;  // a pool block copied out of is registered at once from here
};

enum class RegisterMode : uint8_t { auto_, always, off };

enum class CopyPath : uint8_t {
  driver,      // the program's call, unchanged
  registered,  // the block is already registered by the shim: the copy runs at pinned speed
  register_block,  // register the whole block now, then copy at pinned speed
  staged,      // the shim's pinned staging buffers and worker threads
};
const char* copy_path_name(CopyPath p);

struct CopyRequest {
  uint64_t bytes = 0;            // this copy
  bool block_known = false;      // the host side lies in a tracked host block
  uint64_t block_bytes = 0;      // the registrable (page-aligned) part of that block
  bool block_registered = false;
  uint32_t earlier_copies = 0;   // copies that touched this very block before
  bool host_is_source = true;    // host to device: the source pages are touched for sure
  bool fits_cache = false;       // the block fits the registration cache's limit
  bool may_stage = true;         // stream-ordered semantics allow the staged path here
  bool recycled = false;         // a host pool block: it keeps its registration for its next owners
};

CopyPath choose_copy_path(const CopyCosts& c, RegisterMode mode, const CopyRequest& r);

// The shim's registrations, least recently used first out, within a byte limit. A key is a host
// block instance (its serial number, never reused), so a new block at the address of a freed one
// can never hit a stale entry.
class RegistrationCache {
 public:
  explicit RegistrationCache(uint64_t limit_bytes) : limit_(limit_bytes) {}
  bool contains(uint64_t key) const { return index_.count(key) != 0; }
  // Marks a hit (most recently used). False if the key is not cached.
  bool touch(uint64_t key);
  // Makes room for `bytes` and records the entry; returns the keys to unregister first (LRU),
  // in order. Nothing is inserted (and nothing evicted) if bytes alone exceed the limit.
  std::vector<uint64_t> insert(uint64_t key, uint64_t bytes);
  // The entry went away (freed, unmapped...). Returns its bytes, 0 if unknown.
  uint64_t erase(uint64_t key);
  uint64_t used() const { return used_; }
  uint64_t limit() const { return limit_; }
  size_t size() const { return index_.size(); }

 private:
  struct Entry {
    uint64_t key;
    uint64_t bytes;
  };
  uint64_t limit_;
  uint64_t used_ = 0;
  std::list<Entry> lru_;  // front: least recently used
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
};

}  // namespace gms::policy
