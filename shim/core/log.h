#pragma once
#include <cstddef>
#include <cstdint>

// Logging that never allocates and never calls printf: it runs inside malloc hooks and in the
// middle of driver calls. A line is built in a fixed stack buffer and written with one write(2).
namespace gms {

enum class LogLevel : int { quiet = 0, error = 1, warn = 2, info = 3, debug = 4 };

// The decimal digits of v, written backwards so that the last one ends just before `end`; returns
// the first. For every writer that must not call printf (this logger, the trace writer).
char* format_decimal(uint64_t v, char* end);
// The same for a signed value, with its minus sign.
char* format_decimal(int64_t v, char* end);

class Line {
 public:
  Line& str(const char* s);
  Line& str(const char* s, size_t n);
  Line& chr(char c);
  Line& u64(uint64_t v);
  Line& i64(int64_t v);
  Line& hex(uint64_t v);
  Line& bytes(uint64_t v);          // human form: "1.50 GiB"
  Line& fixed(double v, int decimals);
  Line& pad_to(size_t column);      // spaces up to a column, for tables
  const char* data() const { return buf_; }
  size_t size() const { return n_; }
  void clear() { n_ = 0; }
  void write_to(int fd) const;      // appends nothing: add '\n' yourself

 private:
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
