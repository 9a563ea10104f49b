#pragma once
// Human-readable numbers for the text and HTML reports. Decimal units throughout (1 GB = 10^9 bytes),
// so that sizes and rates in GB/s read against each other directly.
#include <cstdint>
#include <string>

namespace gms::report {

std::string human_bytes(uint64_t bytes);        // "512 B", "40.0 MB", "12.0 GB"
std::string human_duration(int64_t ns);         // "850 ns", "12.3 us", "45.6 ms", "1.23 s"
std::string human_rate(uint64_t bytes, int64_t ns);  // "9.1 GB/s"; "-" when ns is 0
std::string human_gbps(double gbps);            // "9.1 GB/s"
std::string human_count(int64_t n);             // "12,345"
std::string counted(int64_t n, const char* one, const char* many);  // "1 copy", "12,345 copies"
std::string hex_address(uint64_t address);      // "0x7f3a00000000"
std::string percent(double fraction);           // "17%"
// `text` cut to `width` characters, with "..." at the end when cut.
std::string ellipsize(const std::string& text, size_t width);

}  // namespace gms::report
