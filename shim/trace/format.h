#pragma once
// One record as one JSON line (FORMAT.md). Writer side only: it may write a `site` line first.
#include "core/registry.h"
#include "core/stats.h"
#include "record.h"
#include "trace.h"

namespace gms::trace {

class Out;
void format_record(Out& out, const Record& r);

}  // namespace gms::trace
