#include "report/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace gms::report {
namespace {

// Longer names are shown as they are: the demangler's work grows with the name.
constexpr size_t kMaxMangled = 4096;

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

// Where the parameter list that ends the name starts, or npos.
size_t params_start(std::string_view s) {
  if (s.empty() || s.back() != ')') return std::string_view::npos;
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// `s` with the contents of every template argument list at depth 0 replaced by "...".
std::string collapse_templates(std::string_view s) {
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '<' && depth++ == 0) {
      out += "<...";
      continue;
    }
    if (c == '>' && depth > 0 && --depth == 0) {
      out += '>';
      continue;
    }
    if (depth == 0) out += c;
  }
  return depth == 0 ? out : std::string(s);  // unbalanced ("operator<"): left alone
}

}  // namespace

std::string demangle(std::string_view name) {
  if (name.size() < 3 || name.size() > kMaxMangled || name.substr(0, 2) != "_Z") return std::string(name);
  int status = 0;
  std::unique_ptr<char, FreeDeleter> out(abi::__cxa_demangle(std::string(name).c_str(), nullptr, nullptr, &status));
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

std::string short_name(std::string_view demangled, size_t width) {
  std::string s(demangled);
  size_t params = params_start(s);
  if (params != std::string::npos) {
    // The return type (a template function's "void ") ends at the last space outside brackets.
    int depth = 0;
    size_t name_start = 0;
    for (size_t i = 0; i < params; ++i) {
      char c = s[i];
      if (c == '<' || c == '(') ++depth;
      if ((c == '>' || c == ')') && depth > 0) --depth;
      if (c == ' ' && depth == 0) name_start = i + 1;
    }
    s = s.substr(name_start);
    params -= name_start;
    if (s.size() > width && s.size() - params > 5) s = s.substr(0, params) + "(...)";
  }
  if (s.size() > width) s = collapse_templates(s);
  // Then the scope, a whole "ns::" at a time (outside brackets), and last whatever it takes.
  size_t from = 0;
  while (s.size() - from + 3 > width) {
    int depth = 0;
    size_t next = std::string::npos;
    for (size_t i = from; i + 1 < s.size(); ++i) {
      char c = s[i];
      if (c == '<' || c == '(') ++depth;
      if ((c == '>' || c == ')') && depth > 0) --depth;
      if (depth == 0 && c == ':' && s[i + 1] == ':') {
        next = i + 2;
        break;
      }
    }
    if (next == std::string::npos) break;
    from = next;
  }
  if (from > 0) s = "..." + s.substr(from);
  if (s.size() > width && width > 3) s = "..." + s.substr(s.size() - (width - 3));
  return s;
}

}  // namespace gms::report
