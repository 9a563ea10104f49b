#include "policy/step_detect.h"

namespace gms::policy {

Period find_period(const std::vector<uint32_t>& keys, uint64_t min_period) {
  Period best;
  const uint64_t n = keys.size(), max_tail = n / 4;
  if (min_period == 0) min_period = 1;
  auto consider = [&](uint64_t p, uint64_t run, uint64_t tail) {
    if (run > best.matched || (run == best.matched && run != 0 && tail < best.tail)) best = {p, run, tail};
  };
  for (uint64_t p = min_period; 2 * p <= n; ++p) {
    uint64_t run = 0, end = n;  // the stretch being matched, backwards, and one past its last key
    for (uint64_t i = n; i-- > p;) {
      if (keys[i] == keys[i - p]) {
        if (run++ == 0) end = i + 1;
        continue;
      }
      consider(p, run, n - end);
      run = 0;
      if (n - i > max_tail) break;  // any stretch from here on would leave too long a tail
    }
    consider(p, run, n - end);
  }
  if (best.matched < best.period) best = {};
  return best;
}

}  // namespace gms::policy
