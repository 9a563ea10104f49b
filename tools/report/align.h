#pragma once
// Puts the files of one job on one timeline. Within a host every process reads the same
// CLOCK_MONOTONIC, so the headers' t0_ns place them exactly; across hosts the monotonic clocks are
// unrelated and the headers' wall_t0 (wall clock at t0) places each host, as well as the hosts'
// clocks agree. The earliest file's t0 becomes time 0.
#include <cstdint>
#include <string_view>

#include "report/trace.h"

namespace gms::report {

// "2026-11-21T20:30:00Z", with optional fractional seconds and a Z or +HH:MM / -HH:MM offset, to
// nanoseconds since the Unix epoch. Returns false when `s` is not such a time.
bool parse_wall_time(std::string_view s, int64_t* ns);

// Sets every file's offset_ns, moves its events onto the merged timeline, and sets set.span_ns.
void align_files(TraceSet& set);

}  // namespace gms::report
