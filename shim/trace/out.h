#pragma once
// JSON lines into a fixed buffer, written to a file descriptor whenever the buffer fills (a line
// may be split across writes: the file is a stream). No allocation, no printf. Strings are escaped
// for JSON, and bytes that are not UTF-8 become U+FFFD, so every line parses.
#include <cstddef>
#include <cstdint>

#include "core/format.h"

namespace gms::trace {

// Numbers (u64, i64, ...) come from Format (core/format.h), the same formatter as the log's.
class Out : public Format<Out> {
 public:
  constexpr Out(char* buf, size_t cap) : buf_(buf), cap_(cap) {}
  void set_fd(int fd) { fd_ = fd; }
  // A fresh start on another file: nothing buffered, no error.
  void reset(int fd) {
    fd_ = fd;
    n_ = 0;
    error_ = 0;
  }
  int fd() const { return fd_; }

  Out& open(const char* type);       // {"type":"TYPE"
  Out& key(const char* k);           // ,"k":
  Out& addr(uint64_t v);             // "0x1a2b": JSON numbers lose precision above 2^53
  Out& str(const char* s);           // escaped and quoted; null for nullptr
  Out& str(const char* s, size_t n);
  Out& boolean(bool v);
  Out& raw(const char* s);           // as is
  Out& raw(const char* s, size_t n);
  Out& chr(char c);
  Out& close();                      // }\n

  // Writes what is buffered. False once any write failed (then nothing more is written).
  bool flush();
  bool failed() const { return error_ != 0; }
  int error() const { return error_; }
  size_t buffered() const { return n_; }
  void discard() { n_ = 0; }

 private:
  friend class Format<Out>;
  void append(const char* s, size_t n) { raw(s, n); }
  void put(char c) {
    if (n_ == cap_) flush();
    if (n_ < cap_) buf_[n_++] = c;
  }
  char* buf_;
  size_t cap_;
  size_t n_ = 0;
  int fd_ = -1;
  int error_ = 0;
};

// write(2) of all n bytes. A file-size limit (RLIMIT_FSIZE) makes the kernel send SIGXFSZ, which
// kills by default: it is blocked around the write on threads that have it unblocked, and the one
// our write raised is taken back. Returns 0 or the errno of the failure.
int write_all(int fd, const char* p, size_t n);

}  // namespace gms::trace
