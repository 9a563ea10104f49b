// libFuzzer target: any bytes as GPUMEMSHIM_* settings, through the one options parser the shim and
// `gpumemshim run` share (shim/core/options.def). Checks that every complaint is one line and that
// whatever is accepted lies in the option's documented range.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/options.h"

namespace {

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_options: %s\n", what);
  std::abort();
}

void check_line(const char* line, void*) {
  size_t n = std::strlen(line);
  if (n == 0 || std::memchr(line, '\n', n)) broken("a complaint that is not one line");
}

void check_ranges(const gms::Options& o) {
  if (o.swap_chunk.bytes < (2u << 20) || o.swap_chunk.bytes > (64u << 20) ||
      (o.swap_chunk.bytes & (o.swap_chunk.bytes - 1)))
    broken("SWAP_CHUNK accepted outside powers of two from 2M to 64M");
  for (const gms::SizeOrPercent* p : {&o.managed_limit, &o.register_limit, &o.host_pool})
    if (p->is_percent && (p->percent <= 0 || p->percent > 100)) broken("a percentage outside (0, 100] accepted");
  for (int d = 0; d < gms::DeviceLimits::kMaxDevices; ++d)
    if (o.device_limit.for_device(d, 80ull << 30) > (80ull << 30)) broken("a device budget above the device");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One setting per line; lines that do not name a variable are given the prefix, so that most
  // inputs reach a parser.
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\n') {
      if (cur.rfind("GPUMEMSHIM_", 0) != 0) cur = "GPUMEMSHIM_" + cur;
      lines.push_back(cur);
      cur.clear();
    } else if (data[i] != '\0') {
      cur += static_cast<char>(data[i]);
    }
  }
  std::vector<char*> env;
  for (std::string& l : lines) env.push_back(l.data());
  env.push_back(nullptr);
  gms::Options o;
  gms::parse_options(env.data(), &o, check_line, nullptr);
  check_ranges(o);
  char out[1024];
  gms::expand_path_pattern(o.trace.path, 4242, out, sizeof(out));
  gms::expand_path_pattern(o.stats.path, 4242, out, sizeof(out));
  return 0;
}
