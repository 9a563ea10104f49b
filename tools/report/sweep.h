#pragma once
// Attributes timed events to the intervals (kernels, NVTX ranges) that contain them, in one pass
// over both lists sorted by time: the set of open intervals stays as small as the nesting (or the
// concurrency) is, so millions of events cost O(events x open intervals), not events x intervals.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace gms::report {

struct Span {
  int64_t start, end;  // [start, end)
  uint32_t id;
};

// `spans` sorted by start, `times` sorted ascending (pairs of time and event index). Calls
// visit(span_id, event_index) for every event whose time lies inside a span; an event inside
// several (nested ranges, concurrent kernels) counts for each.
template <class Visit>
void for_each_inside(const std::vector<Span>& spans, const std::vector<std::pair<int64_t, uint32_t>>& times,
                     Visit visit) {
  std::vector<const Span*> open;
  size_t next = 0;
  for (const auto& [t, index] : times) {
    while (next < spans.size() && spans[next].start <= t) open.push_back(&spans[next++]);
    open.erase(std::remove_if(open.begin(), open.end(), [t = t](const Span* s) { return s->end <= t; }), open.end());
    for (const Span* s : open) visit(s->id, index);
  }
}

}  // namespace gms::report
