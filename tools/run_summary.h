#pragma once
// The closing summary of `gpumemshim run`, printed once the child has exited.
#include <cstdint>
#include <string>
#include <vector>

#include "spawn.h"

namespace gms::tools {

// What the summary may draw on.
struct RunOutcome {
  const ChildResult& child;
  int exit_code;                // what `gpumemshim run` is about to return
  std::string stats_value;      // GPUMEMSHIM_STATS as the child saw it ("" if unset)
  std::string trace_value;      // GPUMEMSHIM_TRACE as the child saw it ("" if unset)
  double started = 0;           // when the child was started (seconds since the epoch): older files are not its traces
};

// Called exactly once after the child exits, before `run` returns. With a trace it prints one line
// on stderr: the files written (a path with %p, %h, %r or %t can match several) and how to read them.
void print_closing_summary(const RunOutcome& outcome);

// The pieces, for tests. A trace file written by this run and the events its `end` line counts.
struct TraceFile {
  std::string path;
  uint64_t events = 0;
  bool complete = false;  // it has its `end` line
};
// The files a GPUMEMSHIM_TRACE value names (its patterns as wildcards), modified at or after `since`.
std::vector<TraceFile> find_trace_files(const std::string& pattern, double since);
std::string closing_summary_line(const std::vector<TraceFile>& files);

}  // namespace gms::tools
