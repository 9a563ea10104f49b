#include "policy/step_detect.h"

namespace gms::policy {

Period find_period(const std::vector<uint32_t>& keys, uint64_t min_period) {
  Period best;
  const uint64_t n = keys.size();
  if (min_period == 0) min_period = 1;
  for (uint64_t p = min_period; 2 * p <= n; ++p) {
    uint64_t run = 0;
    for (uint64_t i = n; i-- > p && keys[i] == keys[i - p];) ++run;
    if (run > best.matched) best = {p, run};
  }
  if (best.matched < best.period) best = {};
  return best;
}

}  // namespace gms::policy
