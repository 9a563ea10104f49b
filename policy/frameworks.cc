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
  if (have.empty()) return std::string(kOff);
  // Read as XLA reads it: a value not starting with '-' names a file of flags; flags are
  // --name[=value], a value may hold spaces within double quotes, and XLA stops at the first word
  // that is not a flag. Anything else (a file, a stray word, an open quote) is left as it is: the
  // shim's flag would land where XLA does not read it, or change what the program's flags mean.
  if (have.front() != '-') return {};
  size_t at = 0;
  while (at < have.size()) {
    if (std::isspace(static_cast<unsigned char>(have[at]))) {
      ++at;
      continue;
    }
    const size_t start = at;
    bool quoted = false;
    for (; at < have.size() && (quoted || !std::isspace(static_cast<unsigned char>(have[at]))); ++at) {
      if (have[at] == '"') quoted = !quoted;
    }
    if (quoted) return {};
    std::string_view word = have.substr(start, at - start);
    if (!word.starts_with("--")) return {};
    word.remove_prefix(2);
    const std::string_view name = word.substr(0, word.find('='));
    // The program's own choice of command buffers; xla_gpu_graph_level is the older flag for them.
    if (name == "xla_gpu_enable_command_buffer" || name == "xla_gpu_graph_level") return {};
  }
  return std::string(have) + " " + std::string(kOff);
}

}  // namespace gms::policy
