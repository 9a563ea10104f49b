// Library life cycle: read the options when loaded, report when the process exits. The
// destructor runs after the program's atexit handlers and after libcuda's own destructors (it
// was loaded later), so it makes no CUDA call: it only prints what was counted.
#include "core/runtime.h"

namespace {
__attribute__((constructor)) void gms_load() { gms::runtime_init(); }
__attribute__((destructor)) void gms_unload() { gms::runtime_report(); }
}  // namespace
