#pragma once
// The closing summary of `gpumemshim run`, printed once the child has exited.
#include <string>

#include "spawn.h"

namespace gms::tools {

// What the summary may draw on. Tracing will add its file here (and the summary will read it).
struct RunOutcome {
  const ChildResult& child;
  int exit_code;                // what `gpumemshim run` is about to return
  std::string stats_value;      // GPUMEMSHIM_STATS as the child saw it ("" if unset)
};

// The hook point: called exactly once after the child exits, before `run` returns. It prints nothing
// yet: the shim already writes its own statistics at exit, and a one-line summary (faults,
// migrations, spilled bytes) needs the trace, which comes later.
void print_closing_summary(const RunOutcome& outcome);

}  // namespace gms::tools
