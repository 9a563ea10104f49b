#pragma once
// Recycled host blocks (GPUMEMSHIM_HOST_POOL): the book-keeping of a bounded pool of large host
// blocks carved from one address-space reservation. Pure arithmetic over addresses; shim/act/
// host_pool maps, registers and unmaps the memory it describes.
//
// Why: glibc maps every block above 32 MiB fresh and unmaps it at free, so a program that copies
// device data into a new buffer again and again (PyTorch's .cpu(), CuPy's asnumpy) pays a page
// fault per page on every call (1.4 GB/s on our H100 for 40 MB) and can never reuse a
// registration. A freed pool block keeps its pages and its registration for the next allocation
// of about the same size.
//
// Blocks are page multiples inside [base, base + span). Every block is live (the program has it)
// or cached (freed, kept for reuse). Live plus cached bytes never exceed the bound: a request that
// would pass it first gives back least recently freed cached blocks, and is refused (the caller
// falls back to the ordinary allocator) if live blocks alone leave no room.
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <vector>

namespace gms::policy {

struct AddrRange {
  uint64_t lo = 0, hi = 0;
  uint64_t bytes() const { return hi - lo; }
  bool operator==(const AddrRange&) const = default;
};

class HostPool {
 public:
  struct Config {
    uint64_t base = 0;   // the reservation
    uint64_t span = 0;
    uint64_t bound = 0;  // live + cached bytes, at most
    uint64_t page = 4096;
    // Block sizes are multiples of this (0: the page). The shim uses 2 MiB, so that every block
    // starts 2 MiB aligned and can be backed by transparent huge pages end to end: fewer faults
    // at first touch, fewer pages to pin, and the device's DMA reads them faster.
    uint64_t granule = 0;
    // A cached block serves a request when it is at most this much larger (a quarter: .cpu() of
    // a tensor asks for the same size each time, and a little slack lets near sizes share).
    double slack = 0.25;
  };
  explicit HostPool(const Config& c);

  struct Grant {
    uint64_t addr = 0;  // 0: not from the pool
    uint64_t size = 0;  // the block: the request rounded up to pages, or a reused larger block
    bool fresh = false;  // never handed out before: its pages are untouched zeroes
    uint64_t tag = 0;    // what the caller set on this block when it was handed out before
    // Cached blocks given back to make room, to be unmapped (after their registrations are
    // dropped) before the grant is used: their address space may be part of it.
    std::vector<AddrRange> released;
  };
  Grant acquire(uint64_t bytes);
  // The program freed a live block: it is cached (most recently freed). False if addr is not the
  // start of a live block.
  bool release(uint64_t addr);
  // Size of the live block starting at addr; 0 if there is none.
  uint64_t live_size(uint64_t addr) const;
  // An opaque value kept with the block across reuses (the shim keeps the block's serial there,
  // so that its registration is found again).
  void set_tag(uint64_t addr, uint64_t tag);
  // A live block that could not be used (its memory could not be mapped): back to free address
  // space, as if never handed out.
  void discard(uint64_t addr);

  bool owns(uint64_t a) const { return a - cfg_.base < cfg_.span; }
  uint64_t live_bytes() const { return live_; }
  uint64_t cached_bytes() const { return cached_; }

 private:
  struct Block {
    uint64_t size = 0;
    uint64_t tag = 0;
    bool live = false;
    bool used = false;  // handed out at least once
    std::list<uint64_t>::iterator lru;  // when cached
  };
  uint64_t round(uint64_t n) const { return (n + cfg_.granule - 1) / cfg_.granule * cfg_.granule; }
  bool carve(uint64_t size, uint64_t* out);  // first fit in the free address space
  void give_back(uint64_t addr, std::vector<AddrRange>* released);  // a cached block leaves
  void free_space(uint64_t lo, uint64_t hi);  // merges with its neighbours

  Config cfg_;
  uint64_t live_ = 0, cached_ = 0;
  std::map<uint64_t, Block> blocks_;             // addr -> block
  std::multimap<uint64_t, uint64_t> by_size_;   // cached blocks: size -> addr
  std::list<uint64_t> lru_;                      // cached blocks, least recently freed first
  std::map<uint64_t, uint64_t> space_;           // free address space: lo -> hi
};

}  // namespace gms::policy
