#pragma once
#include <cstddef>
#include <cstdint>

#include "format.h"

// Logging that never allocates and never calls printf: it runs inside malloc hooks and in the
// middle of driver calls. A line is built in a fixed stack buffer and written with one write(2).
namespace gms {

enum class LogLevel : int { quiet = 0, error = 1, warn = 2, info = 3, debug = 4 };

// Numbers (u64, i64, hex, fixed, bytes) come from Format (format.h); past the buffer, truncated.
class Line : public Format<Line> {
 public:
  Line& str(const char* s);
  Line& str(const char* s, size_t n);
  Line& chr(char c);
  Line& pad_to(size_t column);      // spaces up to a column, for tables
  const char* data() const { return buf_; }
  size_t size() const { return n_; }
  void clear() { n_ = 0; }
  void write_to(int fd) const;      // appends nothing: add '\n' yourself

 private:
  friend class Format<Line>;
  void append(const char* s, size_t n) { str(s, n); }
  char buf_[1024];
  size_t n_ = 0;
};

void set_log_level(LogLevel level);
LogLevel log_level();
inline bool log_enabled(LogLevel level) { return static_cast<int>(level) <= static_cast<int>(log_level()); }

// Writes "gpumemshim: <line>\n" to stderr when the level is enabled. Warnings and errors are capped
// in number so that a program making millions of bad calls does not drown its own output.
void log(LogLevel level, const Line& line);

}  // namespace gms
