#pragma once
// The report's four outputs. Each takes what it needs and writes to a stream; none changes the model.
#include <cstdio>
#include <string>

#include "report/model.h"
#include "report/tables.h"

namespace gms::report {

// The terminal report: summary, warnings, tables with aligned columns, top offenders.
std::string render_text(const ReportView& view);

// The same report as one JSON document (keys documented in tools/report/README.md).
bool write_json(const TraceSet& set, const Report& report, std::FILE* out);

// Chrome / Perfetto trace event format: {"traceEvents": [...]}, times in microseconds.
bool write_perfetto(const TraceSet& set, std::FILE* out);

// One self-contained HTML page: plots as inline SVG, then the tables.
bool write_html(const TraceSet& set, const Report& report, const ReportView& view, std::FILE* out);

}  // namespace gms::report
