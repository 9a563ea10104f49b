#pragma once
// Reads trace files (shim/trace/FORMAT.md, version 1) line by line into compact events.
#include <string>

#include "report/trace.h"

namespace gms::report {

inline constexpr int64_t kTraceVersion = 1;

// Reads one file and appends it to `set`. Returns false with a one-line message ("FILE:LINE: what")
// when the file cannot be used at all: unreadable, not a trace, a newer format version, a line that
// is not valid JSON or has a key of the wrong type. Problems the report can live with (a missing
// `end` line, a cut-off last line) become warnings in set.warnings.
bool read_trace_file(const std::string& path, TraceSet& set, std::string* error);

}  // namespace gms::report
