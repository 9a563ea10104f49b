#include "out.h"

#include "core/out_file.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace gms::trace {

int write_all(int fd, const char* p, size_t n) { return out_file_write(fd, p, n); }

Out& Out::open(const char* type) {
  raw("{\"type\":\"");
  raw(type);
  return chr('"');
}

Out& Out::key(const char* k) {
  chr(',');
  chr('"');
  raw(k);
  raw("\":");
  return *this;
}

Out& Out::addr(uint64_t v) {
  chr('"');
  hex(v);
  return chr('"');
}

Out& Out::str(const char* s) {
  if (!s) return raw("null");
  return str(s, std::strlen(s));
}

namespace {
// Length of the valid UTF-8 sequence at p (at most n bytes), or 0 if it is not one.
size_t utf8_length(const unsigned char* p, size_t n) {
  unsigned char c = p[0];
  size_t len;
  uint32_t min;
  if (c >= 0xc2 && c <= 0xdf) len = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) len = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) len = 4, min = 0x10000;
  else return 0;
  if (len > n) return 0;
  uint32_t cp = c & (0x7f >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}
}  // namespace

Out& Out::str(const char* s, size_t n) {
  chr('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c == '"' || c == '\\') {
      chr('\\');
      chr(static_cast<char>(c));
      ++i;
    } else if (c == '\n') {
      raw("\\n");
      ++i;
    } else if (c == '\t') {
      raw("\\t");
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      raw("\\u00");
      hex_digits(c, 2);
      ++i;
    } else if (c < 0x80) {
      chr(static_cast<char>(c));
      ++i;
    } else if (size_t len = utf8_length(p + i, n - i)) {
      raw(s + i, len);
      i += len;
    } else {
      raw("\\ufffd");
      ++i;
    }
  }
  return chr('"');
}

Out& Out::boolean(bool v) { return raw(v ? "true" : "false"); }

Out& Out::raw(const char* s) { return raw(s, std::strlen(s)); }

Out& Out::raw(const char* s, size_t n) {
  while (n > 0) {
    if (n_ == cap_ && !flush()) return *this;
    size_t room = cap_ - n_;
    size_t k = n < room ? n : room;
    std::memcpy(buf_ + n_, s, k);
    n_ += k;
    s += k;
    n -= k;
  }
  return *this;
}

Out& Out::chr(char c) {
  put(c);
  return *this;
}

Out& Out::close() { return raw("}\n", 2); }

bool Out::flush() {
  if (error_) {
    n_ = 0;
    return false;
  }
  if (n_ == 0) return true;
  error_ = write_all(fd_, buf_, n_);
  n_ = 0;
  return error_ == 0;
}

}  // namespace gms::trace
