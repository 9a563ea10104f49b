#include "report/json_parse.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace gms::report {

// Recursive descent over RFC 8259. Depth is bounded so that a hostile line cannot overflow the stack.
class JsonDoc::Parser {
 public:
  Parser(JsonDoc& doc, std::string_view text) : doc_(doc), text_(text) {}

  bool run(JsonError* error) {
    skip_space();
    uint32_t root = value(0);
    if (root != kNone) {
      skip_space();
      if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    }
    if (!message_) return true;
    if (error) {
      error->column = pos_ + 1;
      error->message = message_;
    }
    return false;
  }

 private:
  static constexpr int kMaxDepth = 64;

  uint32_t fail(const char* message) {
    if (!message_) message_ = message;
    return kNone;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) ++pos_;
  }
  uint32_t new_node(JsonType type) {
    doc_.nodes_.emplace_back();
    doc_.nodes_.back().type = type;
    return static_cast<uint32_t>(doc_.nodes_.size() - 1);
  }

  uint32_t value(int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply");
    switch (peek()) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': {
        uint32_t n = new_node(JsonType::kString);
        uint32_t off = 0, len = 0;
        if (!string(&off, &len)) return kNone;
        doc_.nodes_[n].str_off = off;
        doc_.nodes_[n].str_len = len;
        return n;
      }
      case 't': return literal("true", JsonType::kBool, true);
      case 'f': return literal("false", JsonType::kBool, false);
      case 'n': return literal("null", JsonType::kNull, false);
      case '\0':
        if (at_end()) return fail("the line ends where a value was expected");
        return fail("unexpected character");
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
        return fail("unexpected character");
    }
  }

  uint32_t literal(const char* word, JsonType type, bool boolean) {
    size_t len = std::strlen(word);
    if (text_.substr(pos_, len) != word) return fail("unexpected character");
    pos_ += len;
    uint32_t n = new_node(type);
    doc_.nodes_[n].boolean = boolean;
    return n;
  }

  uint32_t number() {
    size_t start = pos_;
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++pos_;
    } else {
      return fail("a number needs digits");
    }
    if (peek() == '.') {
      integral = false;
      ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) return fail("a number needs digits after '.'");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) return fail("a number needs digits in its exponent");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    uint32_t n = new_node(JsonType::kNumber);
    Node& node = doc_.nodes_[n];
    if (integral) {
      auto [ptr, ec] = std::from_chars(first, last, node.integer);
      node.is_int = ec == std::errc() && ptr == last;
    }
    auto [ptr, ec] = std::from_chars(first, last, node.number);
    (void)ptr;
    // Out of double range: strtod says which way (HUGE_VAL, or 0 for an underflow).
    if (ec != std::errc() && !node.is_int) node.number = std::strtod(std::string(first, last).c_str(), nullptr);
    if (node.is_int) node.number = static_cast<double>(node.integer);
    return n;
  }

  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool hex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return fail("a \\u escape needs four hex digits"), false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return fail("a \\u escape needs four hex digits"), false;
    }
    *out = v;
    return true;
  }

  // Decodes a string literal into doc_.strings_.
  bool string(uint32_t* off, uint32_t* len) {
    ++pos_;  // opening quote
    std::string& out = doc_.strings_;
    size_t begin = out.size();
    for (;;) {
      if (at_end()) return fail("a string is not closed"), false;
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        break;
      }
      if (static_cast<unsigned char>(c) < 0x20) return fail("a control character inside a string"), false;
      if (c != '\\') {
        // Copy the run of plain characters in one go.
        size_t run = pos_;
        while (run < text_.size() && text_[run] != '"' && text_[run] != '\\' &&
               static_cast<unsigned char>(text_[run]) >= 0x20)
          ++run;
        out.append(text_.data() + pos_, run - pos_);
        pos_ = run;
        continue;
      }
      ++pos_;
      if (at_end()) return fail("a string is not closed"), false;
      char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            uint32_t low = 0;
            if (!hex4(&low)) return false;
            if (low >= 0xDC00 && low < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            else put_utf8(out, 0xFFFD), cp = low;
          }
          if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;  // a lone surrogate
          put_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          return fail("an unknown escape in a string"), false;
      }
    }
    *off = static_cast<uint32_t>(begin);
    *len = static_cast<uint32_t>(out.size() - begin);
    return true;
  }

  // Children are linked through `next`; `tail` is the last child appended so far.
  void link(uint32_t parent, uint32_t* tail, uint32_t child) {
    if (*tail == kNone) doc_.nodes_[parent].first_child = child;
    else doc_.nodes_[*tail].next = child;
    *tail = child;
    ++doc_.nodes_[parent].count;
  }

  uint32_t array(int depth) {
    ++pos_;
    uint32_t n = new_node(JsonType::kArray);
    uint32_t tail = kNone;
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return n;
    }
    for (;;) {
      skip_space();
      uint32_t child = value(depth + 1);
      if (child == kNone) return kNone;
      link(n, &tail, child);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return n;
      }
      return fail(at_end() ? "the line ends inside an array" : "expected ',' or ']' in an array");
    }
  }

  uint32_t object(int depth) {
    ++pos_;
    uint32_t n = new_node(JsonType::kObject);
    uint32_t tail = kNone;
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return n;
    }
    for (;;) {
      skip_space();
      if (peek() != '"') return fail(at_end() ? "the line ends inside an object" : "expected a quoted key in an object");
      uint32_t key_off = 0, key_len = 0;
      if (!string(&key_off, &key_len)) return kNone;
      skip_space();
      if (peek() != ':') return fail("expected ':' after a key");
      ++pos_;
      skip_space();
      uint32_t child = value(depth + 1);
      if (child == kNone) return kNone;
      doc_.nodes_[child].key_off = key_off;
      doc_.nodes_[child].key_len = key_len;
      link(n, &tail, child);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return n;
      }
      return fail(at_end() ? "the line ends inside an object" : "expected ',' or '}' in an object");
    }
  }

  JsonDoc& doc_;
  std::string_view text_;
  size_t pos_ = 0;
  const char* message_ = nullptr;
};

bool JsonDoc::parse(std::string_view text, JsonError* error) {
  nodes_.clear();
  strings_.clear();
  Parser parser(*this, text);
  if (parser.run(error)) return true;
  nodes_.clear();
  strings_.clear();
  return false;
}

JsonType JsonRef::type() const { return doc_->nodes_[index_].type; }
bool JsonRef::is_int() const { return is(JsonType::kNumber) && doc_->nodes_[index_].is_int; }
int64_t JsonRef::as_int() const { return doc_->nodes_[index_].integer; }
double JsonRef::as_double() const { return doc_->nodes_[index_].number; }
bool JsonRef::as_bool() const { return doc_->nodes_[index_].boolean; }

std::string_view JsonRef::as_string() const {
  const JsonDoc::Node& n = doc_->nodes_[index_];
  return std::string_view(doc_->strings_).substr(n.str_off, n.str_len);
}

std::string_view JsonRef::key() const {
  const JsonDoc::Node& n = doc_->nodes_[index_];
  return std::string_view(doc_->strings_).substr(n.key_off, n.key_len);
}

JsonRef JsonRef::first() const {
  if (!valid()) return {};
  uint32_t c = doc_->nodes_[index_].first_child;
  return c == JsonDoc::kNone ? JsonRef() : JsonRef(doc_, c);
}

JsonRef JsonRef::next() const {
  uint32_t c = doc_->nodes_[index_].next;
  return c == JsonDoc::kNone ? JsonRef() : JsonRef(doc_, c);
}

size_t JsonRef::size() const { return valid() ? doc_->nodes_[index_].count : 0; }

JsonRef JsonRef::get(std::string_view key) const {
  if (!is(JsonType::kObject)) return {};
  for (JsonRef c = first(); c.valid(); c = c.next()) {
    if (c.key() == key) return c;
  }
  return {};
}

}  // namespace gms::report
