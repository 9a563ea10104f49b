#pragma once
// What the layers above (act, entry) ask of the real driver: a call made under the guard, the
// calling thread's device, a pointer's device, and the stream helpers every stream-ordered path
// needs. Nothing here decides anything; nothing here allocates.
#include <cstdint>

#include "core/guard.h"
#include "cuda_driver.h"

#define GMS_REAL(sym) ::gms::driver::real<::gms::driver::Fn::sym>()

namespace gms::driver {

// The real call under the guard. Without a driver, the answer a missing symbol would give.
template <typename F, typename... A>
inline CUresult call_real(F f, A... a) {
  if (!f) return CUDA_ERROR_NOT_FOUND;
  ShimScope scope;
  return f(a...);
}

// The device of the calling thread's current context, or -1 when there is none.
int current_device();
// The device memory at `p` lives on, from the driver; -1 when it does not know.
int device_of(uintptr_t p);

// The handle that names a stream in calls without a _ptsz form: stream 0 of a _ptsz call is the
// calling thread's per-thread default stream.
inline CUstream stream_handle(CUstream stream, bool per_thread) {
  return per_thread && !stream ? CU_STREAM_PER_THREAD : stream;
}

// Waits for the work queued on the stream, as a _ptsz call when `per_thread`.
inline CUresult sync_stream(CUstream stream, bool per_thread) {
  return per_thread ? call_real(GMS_REAL(cuStreamSynchronize_ptsz), stream) : call_real(GMS_REAL(cuStreamSynchronize), stream);
}

// Whether the stream is being captured into a graph. An unanswered query counts as yes: nothing the
// shim adds (managed memory, prefetches, staging buffers, registrations) may end up in a graph.
inline bool stream_capturing(CUstream stream, bool per_thread) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = per_thread ? call_real(GMS_REAL(cuStreamIsCapturing_ptsz), stream, &st)
                          : call_real(GMS_REAL(cuStreamIsCapturing), stream, &st);
  return r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

// The calling thread in relaxed capture mode while it lives: the shim's own event waits and
// mappings are then allowed while another thread captures a stream in global mode (which forbids
// them to every thread, and is invalidated by them).
class RelaxedCapture {
 public:
  RelaxedCapture() { ok_ = call_real(GMS_REAL(cuThreadExchangeStreamCaptureMode), &mode_) == CUDA_SUCCESS; }
  ~RelaxedCapture() {
    if (ok_) call_real(GMS_REAL(cuThreadExchangeStreamCaptureMode), &mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool ok_ = false;
};

}  // namespace gms::driver
