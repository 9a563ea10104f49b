#include "report/json_write.h"

#include <cmath>
#include <cstdlib>

namespace gms::report {

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", c);
          out += esc;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void JsonWriter::indent() {
  buf_ += '\n';
  buf_.append(2 * stack_.size(), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) return;
  if (stack_.back().count++ > 0) buf_ += ',';
  if (pretty_) indent();
  else if (break_next_) buf_ += '\n';
  break_next_ = false;
}

void JsonWriter::begin_object() {
  before_value();
  buf_ += '{';
  stack_.push_back({true, 0});
}

void JsonWriter::begin_array() {
  before_value();
  buf_ += '[';
  stack_.push_back({false, 0});
}

void JsonWriter::end_object() {
  bool had = stack_.back().count > 0;
  stack_.pop_back();
  if (pretty_ && had) indent();
  buf_ += '}';
  if (stack_.empty()) buf_ += '\n';
  if (buf_.size() > (1 << 16)) flush();
}

void JsonWriter::end_array() {
  bool had = stack_.back().count > 0;
  stack_.pop_back();
  if (pretty_ && had) indent();
  else if (break_next_) buf_ += '\n';
  break_next_ = false;
  buf_ += ']';
  if (stack_.empty()) buf_ += '\n';
  if (buf_.size() > (1 << 16)) flush();
}

void JsonWriter::key(std::string_view k) {
  before_value();
  append_json_string(buf_, k);
  buf_ += pretty_ ? ": " : ":";
  after_key_ = true;
}

void JsonWriter::value(std::string_view s) {
  before_value();
  append_json_string(buf_, s);
}

void JsonWriter::value(int64_t v) {
  before_value();
  buf_ += std::to_string(v);
}

void JsonWriter::value(uint64_t v) {
  before_value();
  buf_ += std::to_string(v);
}

void JsonWriter::value(bool v) {
  before_value();
  buf_ += v ? "true" : "false";
}

void JsonWriter::raw_number(std::string_view digits) {
  before_value();
  buf_ += digits;
}

void JsonWriter::null() {
  before_value();
  buf_ += "null";
}

void JsonWriter::value_fixed(double v, int decimals) {
  before_value();
  if (!std::isfinite(v)) {
    buf_ += "null";  // JSON has no infinities
    return;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  // "-0.000" would make golden files depend on rounding direction.
  if (text[0] == '-' && std::strtod(text, nullptr) == 0) {
    buf_ += text + 1;
    return;
  }
  buf_ += text;
}

bool JsonWriter::flush() {
  if (!buf_.empty() && out_) {
    if (std::fwrite(buf_.data(), 1, buf_.size(), out_) != buf_.size()) failed_ = true;
  }
  buf_.clear();
  return !failed_;
}

}  // namespace gms::report
