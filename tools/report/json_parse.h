#pragma once
// A small JSON parser for one line of a trace at a time. A trace can hold millions of lines, so the
// reader keeps one JsonDoc and parses every line into it: nodes and decoded strings live in two
// vectors whose capacity is kept between lines, and nothing is allocated per line once they have
// grown. The whole text is validated (a bad line is reported with its column), numbers keep
// integers exact up to 2^63 (JSON doubles lose sizes and counts above 2^53).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gms::report {

enum class JsonType : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

class JsonDoc;

// A view of one value inside a JsonDoc; valid until the document parses its next text.
class JsonRef {
 public:
  JsonRef() = default;
  bool valid() const { return doc_ != nullptr; }
  JsonType type() const;
  bool is(JsonType t) const { return valid() && type() == t; }
  // A number written without fraction or exponent that fits in int64.
  bool is_int() const;
  int64_t as_int() const;
  double as_double() const;
  bool as_bool() const;
  std::string_view as_string() const;
  // The string, or `fallback` when this is absent or not a string.
  std::string_view string_or(std::string_view fallback = {}) const {
    return is(JsonType::kString) ? as_string() : fallback;
  }
  // Object member by key; an invalid ref when absent or when this is not an object.
  JsonRef get(std::string_view key) const;
  // Children of an array or object: first(), then next() until !valid(); key() for members.
  JsonRef first() const;
  JsonRef next() const;
  std::string_view key() const;
  size_t size() const;

 private:
  friend class JsonDoc;
  JsonRef(const JsonDoc* doc, uint32_t index) : doc_(doc), index_(index) {}
  const JsonDoc* doc_ = nullptr;
  uint32_t index_ = 0;
};

struct JsonError {
  size_t column = 0;  // 1-based position in the text
  std::string message;
};

class JsonDoc {
 public:
  // Parses `text` (one complete JSON value, surrounding white space allowed). On failure returns
  // false and fills `error`; the document is then empty.
  bool parse(std::string_view text, JsonError* error);
  JsonRef root() const { return nodes_.empty() ? JsonRef() : JsonRef(this, 0); }

 private:
  friend class JsonRef;
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    JsonType type = JsonType::kNull;
    bool is_int = false;
    bool boolean = false;
    uint32_t next = kNone;         // next sibling
    uint32_t first_child = kNone;  // arrays and objects
    uint32_t count = 0;            // number of children
    uint32_t key_off = 0, key_len = 0;
    uint32_t str_off = 0, str_len = 0;
    int64_t integer = 0;
    double number = 0;
  };
  class Parser;
  std::vector<Node> nodes_;
  std::string strings_;  // decoded keys and string values, referenced by offset
};

}  // namespace gms::report
