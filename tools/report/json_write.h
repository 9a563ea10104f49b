#pragma once
// Writes JSON to a FILE* through a buffer, pretty-printed (the report: diffable golden files) or
// compact (the Perfetto timeline, which can hold millions of events). Fractions are written with a
// fixed number of decimals so that the same trace always gives the same bytes.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace gms::report {

// Appends `s` to `out` as a JSON string literal (quotes included).
void append_json_string(std::string& out, std::string_view s);

class JsonWriter {
 public:
  JsonWriter(std::FILE* out, bool pretty) : out_(out), pretty_(pretty) {}
  ~JsonWriter() { flush(); }
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(std::string_view k);
  void value(std::string_view s);
  void value(const char* s) { value(std::string_view(s)); }
  void value(const std::string& s) { value(std::string_view(s)); }
  void value(int64_t v);
  void value(uint64_t v);
  void value(int v) { value(static_cast<int64_t>(v)); }
  void value(bool v);
  void value_fixed(double v, int decimals);
  void null();
  // A number already formatted (the caller guarantees it is valid JSON).
  void raw_number(std::string_view digits);
  // In compact mode, a line break before the next item (one Perfetto event per line stays greppable).
  void newline_before_next() { break_next_ = true; }
  // Writes the buffer out; returns false if the stream failed.
  bool flush();

 private:
  void before_value();
  void indent();
  struct Level {
    bool object;
    int count;
  };
  std::FILE* out_;
  bool pretty_;
  bool after_key_ = false;
  bool break_next_ = false;
  bool failed_ = false;
  std::vector<Level> stack_;
  std::string buf_;
};

}  // namespace gms::report
