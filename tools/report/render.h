#pragma once
// The report's four outputs. Each takes what it needs and writes to a stream; none changes the model.
#include <cstdio>
#include <string>
#include <string_view>

#include "report/model.h"
#include "report/tables.h"

namespace gms::report {

// The terminal report: summary, warnings, tables with aligned columns, top offenders. Every piece
// goes through terminal_safe.
std::string render_text(const ReportView& view);
// Control characters (C0, DEL, C1) as \xNN or \u00NN, so that no name from a trace can cut the
// report short (NUL) or drive the terminal (escape sequences).
std::string terminal_safe(std::string_view s);

// The same report as one JSON document (keys documented in tools/report/README.md).
bool write_json(const TraceSet& set, const Report& report, std::FILE* out);

// Chrome / Perfetto trace event format: {"traceEvents": [...]}, times in microseconds.
bool write_perfetto(const TraceSet& set, std::FILE* out);

// One self-contained HTML page: plots as inline SVG, then the tables.
bool write_html(const TraceSet& set, const Report& report, const ReportView& view, std::FILE* out);

}  // namespace gms::report
