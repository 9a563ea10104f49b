#pragma once
// Where the shim library is, and how it goes into LD_PRELOAD.
#include <string>
#include <vector>

namespace gms::tools {

inline constexpr const char kShimFileName[] = "libgpumemshim.so";

// The directory holding this executable (from /proc/self/exe), or "" if it cannot be read.
std::string self_directory();

// The places the shim may be, relative to the command's own directory, best first:
// an installed prefix (<prefix>/bin -> <prefix>/lib) and a build tree (<build>/tools -> <build>/shim).
std::vector<std::string> shim_candidates(const std::string& bindir);

// The first candidate that exists, made absolute and canonical; "" if none does.
std::string find_shim(const std::vector<std::string>& candidates);

// LD_PRELOAD with `shim` first, followed by the entries of `existing` (space or colon separated).
// Entries that are another copy of the shim (same file name) are dropped: two shims in one process
// would each intercept every call.
std::string prepend_preload(const std::string& shim, const std::string& existing);

// LD_PRELOAD without any copy of the shim (for `doctor`, which must talk to the driver directly).
std::string remove_shim_from_preload(const std::string& existing);

// True if `path` can be written into LD_PRELOAD as one entry (ld.so has no quoting).
bool preload_safe_path(const std::string& path);

}  // namespace gms::tools
