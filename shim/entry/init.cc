// Library life cycle: read the options when loaded, report when the process exits. The
// destructor runs after the program's atexit handlers and after libcuda's own destructors (it
// was loaded later), so it makes no CUDA call: it only prints what was counted.
#include "act/copy.h"
#include "act/host_pool.h"
#include "act/placement.h"
#include "core/runtime.h"
#include "driver/calls.h"
#include "common.h"
#include "trace/cuda_backend.h"
#include "trace/trace.h"

namespace {
__attribute__((constructor)) void gms_load() {
  gms::runtime_init();
  gms::trace::configure(gms::options());  // after the runtime's fork handlers: see trace::configure
  gms::act::copy_init();
  gms::act::pool::init();
  gms::act::placement_init();
  gms::trace::attach_cuda_backend();
}
// The trace ends before the statistics are written (CUPTI's last records were flushed by an
// atexit handler, which runs before any destructor).
__attribute__((destructor)) void gms_unload() {
  gms::trace::finish();
  gms::runtime_report();
}
}  // namespace

// The program's first driver call, in practice: a traced program's CUPTI starts here (the file at
// its first event), before a framework sets up a copy of its own. JAX's CUDA plugin loads the libcupti of its wheel and XLA
// takes CUPTI's one subscriber (CUDA 13.0) before its first allocation, the trace's first event;
// the trace then had no kernel at all (tools/report/README.md, "JAX: no CUPTI records").
GMS_EXPORT CUresult cuInit(unsigned int flags) {
  if (::gms::in_shim()) return gms::driver::call_real(GMS_REAL(cuInit), flags);
  CUresult r = gms::driver::call_real(GMS_REAL(cuInit), flags);
  if (r == CUDA_SUCCESS && gms::trace::enabled()) gms::trace::start_device_records();
  return r;
}

// Flushes CUPTI's records and the shim's events to the trace file now: 0 when written, -1 when the
// process is not tracing. For programs that leave with _exit, or get killed, at a known point.
extern "C" __attribute__((visibility("default"))) int gpumemshim_trace_flush(void) {
  return gms::trace::flush() ? 0 : -1;
}
