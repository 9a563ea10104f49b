#pragma once
// The HTML report's plots, computed from the events: bandwidth over time per direction, device
// memory against the budget, faults and migrations over address and time, copies by kind.
#include <string>

#include "report/model.h"
#include "report/svg_plot.h"

namespace gms::report {

struct Plot {
  std::string svg;
  std::string caption;  // one or two sentences under the plot: what it shows, how it was sampled
};

Plot bandwidth_plot(const TraceSet& set, const Report& report);
Plot memory_plot(const TraceSet& set);
Plot fault_plot(const TraceSet& set, const Report& report);
Plot copies_plot(const Report& report);

}  // namespace gms::report
