#pragma once
// Reads trace files (shim/trace/FORMAT.md, version 1) line by line into compact events.
#include <cstdio>
#include <string>

#include "report/trace.h"

namespace gms::report {

inline constexpr int64_t kTraceVersion = 1;
// The longest line read: the shim's lines are far shorter (a header with its argv, a site with its
// frames, a kernel's name), and a longer one would only cost memory.
inline constexpr size_t kMaxTraceLine = 4u << 20;

// Reads one file and appends it to `set`. Returns false with a one-line message ("FILE:LINE: what")
// when the file cannot be used at all: unreadable, not a trace, a newer format version, a line that
// is not valid JSON or has a key of the wrong type. Problems the report can live with (a missing
// `end` line, a cut-off last line) become warnings in set.warnings.
// "-" reads standard input.
bool read_trace_file(const std::string& path, TraceSet& set, std::string* error);
// The same from an open stream, named `name` in messages (the fuzz target reads from memory).
bool read_trace_stream(std::FILE* in, const std::string& name, TraceSet& set, std::string* error);

}  // namespace gms::report
