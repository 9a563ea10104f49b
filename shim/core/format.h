#pragma once
// Numbers as text with no printf and no allocation: the one formatter of every writer that runs
// inside hooks or beside them (the log's Line, the trace's Out). A writer derives from
// Format<itself> and provides append(const char*, size_t); what append does when the writer is
// full (truncate, flush) is the writer's own business.
#include <cstddef>
#include <cstdint>

namespace gms {

template <typename W>
class Format {
 public:
  W& u64(uint64_t v) {
    char tmp[24];
    char* first = decimal(v, tmp + sizeof(tmp));
    return put(first, static_cast<size_t>(tmp + sizeof(tmp) - first));
  }
  W& i64(int64_t v) {
    char tmp[24];
    char* first = v >= 0 ? decimal(static_cast<uint64_t>(v), tmp + sizeof(tmp))
                         : decimal(static_cast<uint64_t>(-(v + 1)) + 1, tmp + sizeof(tmp));  // INT64_MIN has no positive
    if (v < 0) *--first = '-';
    return put(first, static_cast<size_t>(tmp + sizeof(tmp) - first));
  }
  // "0x1a2b"
  W& hex(uint64_t v) {
    char tmp[18];
    size_t i = sizeof(tmp);
    do {
      tmp[--i] = kDigits[v & 15];
      v >>= 4;
    } while (v != 0);
    tmp[--i] = 'x';
    tmp[--i] = '0';
    return put(tmp + i, sizeof(tmp) - i);
  }
  // The low `digits` hex digits of v, zero padded, no prefix ("00af").
  W& hex_digits(uint64_t v, int digits) {
    for (int i = digits - 1; i >= 0; --i) put(&kDigits[(v >> (4 * i)) & 15], 1);
    return self();
  }
  W& fixed(double v, int decimals) {
    if (v < 0) {
      put("-", 1);
      v = -v;
    }
    uint64_t scale = 1;
    for (int i = 0; i < decimals; ++i) scale *= 10;
    uint64_t scaled = static_cast<uint64_t>(v * static_cast<double>(scale) + 0.5);
    u64(scaled / scale);
    if (decimals > 0) {
      put(".", 1);
      uint64_t frac = scaled % scale;
      for (uint64_t div = scale / 10; div > 0; div /= 10) put(&kDigits[(frac / div) % 10], 1);
    }
    return self();
  }
  // Human form: "512 B", "1.50 GiB".
  W& bytes(uint64_t v) {
    static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (v < 1024) return u64(v).put(" B", 2);
    double d = static_cast<double>(v);
    int unit = 0;
    while (d >= 1024.0 && unit < 5) {
      d /= 1024.0;
      ++unit;
    }
    fixed(d, 2).put(" ", 1);
    const char* u = kUnits[unit];
    size_t n = 0;
    while (u[n]) ++n;
    return put(u, n);
  }

 private:
  static constexpr char kDigits[] = "0123456789abcdef";
  // The decimal digits of v, written backwards so that the last one ends just before `end`.
  static char* decimal(uint64_t v, char* end) {
    do {
      *--end = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    return end;
  }
  W& self() { return static_cast<W&>(*this); }
  W& put(const char* s, size_t n) {
    self().append(s, n);
    return self();
  }
};

}  // namespace gms
