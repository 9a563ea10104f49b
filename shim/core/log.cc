#include "log.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace gms {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};
std::atomic<int> g_complaints{0};
constexpr int kMaxComplaints = 200;
}  // namespace

Line& Line::str(const char* s) { return s ? str(s, std::strlen(s)) : str("(null)", 6); }

Line& Line::str(const char* s, size_t n) {
  size_t room = sizeof(buf_) - 1 - n_;
  if (n > room) n = room;
  std::memcpy(buf_ + n_, s, n);
  n_ += n;
  buf_[n_] = '\0';
  return *this;
}

Line& Line::chr(char c) { return str(&c, 1); }

char* format_decimal(uint64_t v, char* end) {
  do {
    *--end = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return end;
}

char* format_decimal(int64_t v, char* end) {
  if (v >= 0) return format_decimal(static_cast<uint64_t>(v), end);
  char* p = format_decimal(static_cast<uint64_t>(-(v + 1)) + 1, end);  // INT64_MIN has no positive
  *--p = '-';
  return p;
}

Line& Line::u64(uint64_t v) {
  char tmp[24];
  char* first = format_decimal(v, tmp + sizeof(tmp));
  return str(first, static_cast<size_t>(tmp + sizeof(tmp) - first));
}

Line& Line::i64(int64_t v) {
  char tmp[24];
  char* first = format_decimal(v, tmp + sizeof(tmp));
  return str(first, static_cast<size_t>(tmp + sizeof(tmp) - first));
}

Line& Line::hex(uint64_t v) {
  char tmp[18];
  int i = sizeof(tmp);
  do {
    tmp[--i] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  str("0x", 2);
  return str(tmp + i, sizeof(tmp) - i);
}

Line& Line::fixed(double v, int decimals) {
  if (v < 0) {
    chr('-');
    v = -v;
  }
  uint64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  uint64_t scaled = static_cast<uint64_t>(v * static_cast<double>(scale) + 0.5);
  u64(scaled / scale);
  if (decimals > 0) {
    chr('.');
    uint64_t frac = scaled % scale;
    for (uint64_t div = scale / 10; div > 0; div /= 10) {
      chr(static_cast<char>('0' + (frac / div) % 10));
    }
  }
  return *this;
}

Line& Line::bytes(uint64_t v) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (v < 1024) return u64(v).str(" B");
  double d = static_cast<double>(v);
  int unit = 0;
  while (d >= 1024.0 && unit < 5) {
    d /= 1024.0;
    ++unit;
  }
  return fixed(d, 2).chr(' ').str(kUnits[unit]);
}

Line& Line::pad_to(size_t column) {
  while (n_ < column && n_ < sizeof(buf_) - 1) chr(' ');
  return *this;
}

void Line::write_to(int fd) const {
  size_t off = 0;
  while (off < n_) {
    ssize_t w = ::write(fd, buf_ + off, n_ - off);
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void log(LogLevel level, const Line& line) {
  if (!log_enabled(level)) return;
  if (level <= LogLevel::warn) {
    int n = g_complaints.fetch_add(1, std::memory_order_relaxed);
    if (n > kMaxComplaints) return;
    if (n == kMaxComplaints) {
      Line l;
      l.str("gpumemshim: further warnings suppressed\n");
      l.write_to(2);
      return;
    }
  }
  Line out;
  out.str("gpumemshim: ").str(line.data(), line.size()).chr('\n');
  out.write_to(2);
}

}  // namespace gms
