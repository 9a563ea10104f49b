#include "preload.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

namespace gms::tools {
namespace {

// ld.so splits LD_PRELOAD on both spaces and colons.
std::vector<std::string> split_preload(const std::string& value) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : value) {
    if (c == ' ' || c == ':') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool is_shim_entry(const std::string& entry) {
  size_t slash = entry.rfind('/');
  std::string base = slash == std::string::npos ? entry : entry.substr(slash + 1);
  return base == kShimFileName;
}

std::string join_without_shim(const std::string& first, const std::string& existing) {
  std::string out = first;
  for (const std::string& e : split_preload(existing)) {
    if (is_shim_entry(e)) continue;
    if (!out.empty()) out += ':';
    out += e;
  }
  return out;
}

}  // namespace

std::string self_directory() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string exe(buf, static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

std::vector<std::string> shim_candidates(const std::string& bindir) {
  if (bindir.empty()) return {};
  return {bindir + "/../lib/" + kShimFileName, bindir + "/../shim/" + kShimFileName};
}

std::string find_shim(const std::vector<std::string>& candidates) {
  for (const std::string& c : candidates) {
    char resolved[PATH_MAX];
    if (access(c.c_str(), R_OK) == 0 && realpath(c.c_str(), resolved)) return resolved;
  }
  return "";
}

std::string prepend_preload(const std::string& shim, const std::string& existing) {
  return join_without_shim(shim, existing);
}

std::string remove_shim_from_preload(const std::string& existing) { return join_without_shim("", existing); }

bool preload_safe_path(const std::string& path) {
  return !path.empty() && path.find_first_of(" :") == std::string::npos;
}

}  // namespace gms::tools
