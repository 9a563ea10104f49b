#include "policy/frameworks.h"

#include <cctype>
#include <vector>

namespace gms::policy {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool equals_ci(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

std::string torch_alloc_conf(const char* user) {
  constexpr std::string_view kAsync = "backend:cudaMallocAsync";
  if (!user) return std::string(kAsync);
  std::vector<std::string_view> items;
  std::string_view rest(user);
  while (true) {
    const size_t comma = rest.find(',');
    items.push_back(trim(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  size_t expandable = items.size();
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t colon = items[i].find(':');
    const std::string_view key = trim(items[i].substr(0, colon));
    const std::string_view value = colon == std::string_view::npos ? std::string_view() : trim(items[i].substr(colon + 1));
    if (key == "backend") return {};  // the program chose its backend
    if (key == "expandable_segments") {
      if (colon == std::string_view::npos) return {};  // malformed: PyTorch's own error
      if (equals_ci(value, "true") || value == "1") expandable = i;
    }
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty()) continue;
    if (!out.empty()) out += ',';
    out += i == expandable ? kAsync : items[i];
  }
  if (expandable == items.size()) out += out.empty() ? std::string(kAsync) : "," + std::string(kAsync);
  return out;
}

std::string xla_flags(const char* user) {
  constexpr std::string_view kOff = "--xla_gpu_enable_command_buffer=";
  const std::string_view have = user ? trim(user) : std::string_view();
  std::string_view rest = have;
  while (!rest.empty()) {
    size_t end = 0;
    while (end < rest.size() && !std::isspace(static_cast<unsigned char>(rest[end]))) ++end;
    std::string_view name = rest.substr(0, end);
    rest = trim(rest.substr(end));
    // XLA takes one or two dashes before a flag's name.
    if (name.starts_with("--")) {
      name.remove_prefix(2);
    } else if (name.starts_with("-")) {
      name.remove_prefix(1);
    } else {
      continue;
    }
    name = name.substr(0, name.find('='));
    if (name == "xla_gpu_enable_command_buffer" || name == "flagfile") return {};
  }
  return have.empty() ? std::string(kOff) : std::string(have) + " " + std::string(kOff);
}

}  // namespace gms::policy
