#pragma once
// Arithmetic on numbers read from traces: sums and differences saturate at the type's bounds instead
// of wrapping, since a broken or hostile trace may hold numbers near 2^63.
#include <cstdint>
#include <limits>
#include <type_traits>

namespace gms::report {

template <class T, class U>
void add_to(T& total, U value) {
  if (__builtin_add_overflow(total, value, &total)) {
    bool down = false;
    if constexpr (std::is_signed_v<U>) down = value < 0;
    total = down ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
  }
}
template <class T, class U>
T sat_sum(T a, U b) {
  add_to(a, b);
  return a;
}
inline int64_t sat_diff(int64_t a, int64_t b) {
  int64_t d;
  if (__builtin_sub_overflow(a, b, &d)) d = b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return d;
}

}  // namespace gms::report
