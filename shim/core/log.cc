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
