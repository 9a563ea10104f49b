#pragma once
// The report's tables as rows of display strings, built once and printed by both the terminal
// renderer and the HTML page, so the two always show the same thing.
#include <cstddef>
#include <string>
#include <vector>

#include "report/model.h"

namespace gms::report {

struct Table {
  std::string id;     // stable name, also the HTML element id
  std::string title;
  std::vector<std::string> headers;
  std::vector<bool> numeric;  // right-aligned columns
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // lines under the table
  std::string empty;               // said instead of the table when it has no rows
};

struct ReportView {
  std::vector<std::string> summary;   // first lines: what was read
  std::vector<std::string> warnings;
  std::vector<Table> tables;
  std::vector<std::string> offenders;  // "1. [1.23 s] hint"
};

// `max_rows` bounds the long tables (sites, regions, kernels, ranges); a note says how many more.
ReportView build_view(const TraceSet& set, const Report& report, size_t max_rows);

}  // namespace gms::report
