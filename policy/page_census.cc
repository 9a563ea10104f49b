#include "policy/page_census.h"

#include <cstddef>

namespace gms::policy {

PageCensus::PageCensus(uint64_t pages) : pages_(pages), present_((pages + 63) / 64), away_((pages + 63) / 64) {}

PageMoves PageCensus::look(const uint64_t* present, bool gpu_used) {
  PageMoves m;
  const size_t n = present_.size();
  for (size_t i = 0; i < n; ++i) {
    // Bits past the last page are never counted.
    const uint64_t mask = i + 1 < n || pages_ % 64 == 0 ? ~0ull : (1ull << (pages_ % 64)) - 1;
    const uint64_t now = present[i] & mask;
    if (looked_) {
      const uint64_t left = present_[i] & ~now;
      const uint64_t back = ~present_[i] & now & away_[i];
      m.to_gpu += static_cast<uint64_t>(__builtin_popcountll(left));
      m.to_cpu += static_cast<uint64_t>(__builtin_popcountll(back));
      away_[i] |= left;
    }
    if (gpu_used) away_[i] |= ~now & mask;
    away_[i] &= ~now;
    present_[i] = now;
  }
  looked_ = true;
  return m;
}

uint64_t PageCensus::cpu_pages() const {
  uint64_t n = 0;
  for (uint64_t w : present_) n += static_cast<uint64_t>(__builtin_popcountll(w));
  return n;
}

}  // namespace gms::policy
