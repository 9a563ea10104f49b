#include "policy/lifetime.h"

#include <algorithm>

namespace gms::policy {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64's finaliser over the running hash: sizes differ in few bits.
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace

LifetimeForecast::Key LifetimeForecast::made(uint64_t bytes) {
  constexpr uint32_t kRing = sizeof(recent_) / sizeof(recent_[0]);
  const uint32_t context = std::min(cfg_.context, kRing);
  Key k = mix(0, bytes);
  for (uint32_t i = 1; i <= context; ++i) k = mix(k, recent_[(next_ + kRing - i) % kRing]);
  recent_[next_] = bytes;
  next_ = (next_ + 1) % kRing;
  return k;
}

bool LifetimeForecast::dies_idle(Key key) const {
  auto it = counts_.find(key);
  return it != counts_.end() && it->second >= 2;
}

void LifetimeForecast::ended(Key key, uint64_t idle) {
  auto it = counts_.find(key);
  if (idle < cfg_.idle) {
    // Only keys that ever died idle are kept: programs whose sizes vary would fill the table.
    if (it != counts_.end() && it->second > 0 && --it->second == 0) counts_.erase(it);
    return;
  }
  if (it == counts_.end()) {
    if (counts_.size() >= cfg_.capacity) counts_.clear();
    it = counts_.emplace(key, uint8_t{0}).first;
  }
  it->second = static_cast<uint8_t>(std::min(3, it->second + 1));
}

}  // namespace gms::policy
