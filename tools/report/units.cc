#include "report/units.h"

#include <cinttypes>
#include <cstdio>

namespace gms::report {

std::string human_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"kB", "MB", "GB", "TB", "PB"};
  if (bytes < 1000) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1000;
  int unit = 0;
  while (v >= 999.95 && unit < 4) v /= 1000, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", v, kUnits[unit]);
  return text;
}

std::string human_duration(int64_t ns) {
  char text[32];
  if (ns < 1000) std::snprintf(text, sizeof text, "%" PRId64 " ns", ns);
  else if (ns < 1000000) std::snprintf(text, sizeof text, "%.1f us", static_cast<double>(ns) / 1e3);
  else if (ns < 1000000000) std::snprintf(text, sizeof text, "%.1f ms", static_cast<double>(ns) / 1e6);
  else std::snprintf(text, sizeof text, "%.2f s", static_cast<double>(ns) / 1e9);
  return text;
}

std::string human_gbps(double gbps) {
  char text[32];
  if (gbps >= 0.095 || gbps == 0) std::snprintf(text, sizeof text, "%.1f GB/s", gbps);
  else std::snprintf(text, sizeof text, "%.1f MB/s", gbps * 1000);
  return text;
}

std::string human_rate(uint64_t bytes, int64_t ns) {
  if (ns <= 0) return "-";
  return human_gbps(static_cast<double>(bytes) / static_cast<double>(ns));
}

std::string human_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string counted(int64_t n, const char* one, const char* many) {
  return human_count(n) + " " + (n == 1 ? one : many);
}

std::string hex_address(uint64_t address) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%" PRIx64, address);
  return text;
}

std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", fraction * 100);
  return text;
}

std::string ellipsize(const std::string& text, size_t width) {
  if (text.size() <= width || width < 4) return text;
  return text.substr(0, width - 3) + "...";
}

}  // namespace gms::report
