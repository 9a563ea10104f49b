#include "host_pool.h"

#include <iterator>

namespace gms::policy {

HostPool::HostPool(const Config& c) : cfg_(c) {
  if (cfg_.page == 0) cfg_.page = 4096;
  if (cfg_.granule < cfg_.page) cfg_.granule = cfg_.page;
  cfg_.granule = (cfg_.granule + cfg_.page - 1) / cfg_.page * cfg_.page;
  cfg_.span = cfg_.span / cfg_.granule * cfg_.granule;
  if (cfg_.span) space_[cfg_.base] = cfg_.base + cfg_.span;
}

HostPool::Grant HostPool::acquire(uint64_t bytes) {
  Grant g;
  if (bytes == 0) return g;
  uint64_t need = round(bytes);
  if (need < bytes || need > cfg_.bound || live_ + need > cfg_.bound) return g;

  // The smallest cached block that fits within the slack.
  uint64_t most = need + static_cast<uint64_t>(static_cast<double>(need) * cfg_.slack);
  auto fit = by_size_.lower_bound(need);
  if (fit != by_size_.end() && fit->first <= most) {
    // Of the blocks of that size, the one freed last: a program that frees a buffer and makes
    // another (.cpu(), asnumpy() in a loop) gets the same block back each time, with its pages in
    // cache and its registration, whose cost its copies so far have paid for. Handing out the
    // oldest instead would cycle through every cached block of the size, each copied too seldom
    // to be registered.
    fit = std::prev(by_size_.upper_bound(fit->first));
    uint64_t addr = fit->second;
    Block& b = blocks_[addr];
    by_size_.erase(fit);
    lru_.erase(b.lru);
    cached_ -= b.size;
    live_ += b.size;
    b.live = true;
    g.addr = addr;
    g.size = b.size;
    g.fresh = !b.used;
    g.tag = b.tag;
    b.used = true;
    return g;
  }

  // A new block: make room under the bound, then find address space, giving back least recently
  // freed blocks until both hold (given-back space merges, so a fit may appear).
  while (live_ + cached_ + need > cfg_.bound && !lru_.empty()) give_back(lru_.front(), &g.released);
  uint64_t addr = 0;
  while (!carve(need, &addr)) {
    if (lru_.empty()) return g;  // address space too fragmented by live blocks: not from the pool
    give_back(lru_.front(), &g.released);
  }
  Block b;
  b.size = need;
  b.live = true;
  b.used = true;
  blocks_[addr] = b;
  live_ += need;
  g.addr = addr;
  g.size = need;
  g.fresh = true;
  return g;
}

bool HostPool::release(uint64_t addr) {
  auto it = blocks_.find(addr);
  if (it == blocks_.end() || !it->second.live) return false;
  Block& b = it->second;
  b.live = false;
  live_ -= b.size;
  cached_ += b.size;
  b.lru = lru_.insert(lru_.end(), addr);
  by_size_.emplace(b.size, addr);
  return true;
}

uint64_t HostPool::live_size(uint64_t addr) const {
  auto it = blocks_.find(addr);
  return it != blocks_.end() && it->second.live ? it->second.size : 0;
}

void HostPool::set_tag(uint64_t addr, uint64_t tag) {
  auto it = blocks_.find(addr);
  if (it != blocks_.end()) it->second.tag = tag;
}

void HostPool::discard(uint64_t addr) {
  auto it = blocks_.find(addr);
  if (it == blocks_.end() || !it->second.live) return;
  live_ -= it->second.size;
  free_space(addr, addr + it->second.size);
  blocks_.erase(it);
}

bool HostPool::carve(uint64_t size, uint64_t* out) {
  for (auto it = space_.begin(); it != space_.end(); ++it) {
    if (it->second - it->first < size) continue;
    *out = it->first;
    uint64_t lo = it->first + size, hi = it->second;
    space_.erase(it);
    if (lo < hi) space_[lo] = hi;
    return true;
  }
  return false;
}

void HostPool::give_back(uint64_t addr, std::vector<AddrRange>* released) {
  auto it = blocks_.find(addr);
  Block& b = it->second;
  lru_.erase(b.lru);
  for (auto s = by_size_.lower_bound(b.size); s != by_size_.end() && s->first == b.size; ++s) {
    if (s->second == addr) {
      by_size_.erase(s);
      break;
    }
  }
  cached_ -= b.size;
  released->push_back(AddrRange{addr, addr + b.size});
  free_space(addr, addr + b.size);
  blocks_.erase(it);
}

void HostPool::free_space(uint64_t lo, uint64_t hi) {
  auto next = space_.lower_bound(lo);
  if (next != space_.end() && next->first == hi) {
    hi = next->second;
    next = space_.erase(next);
  }
  if (next != space_.begin()) {
    auto prev = std::prev(next);
    if (prev->second == lo) {
      prev->second = hi;
      return;
    }
  }
  space_[lo] = hi;
}

}  // namespace gms::policy
