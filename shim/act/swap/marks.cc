#include "marks.h"

#include <algorithm>

#include "core/log.h"

namespace gms::act::swap {

using driver::call_real;

namespace {
// Each copy out goes in pieces of this size, each behind a wait on the GPU for the gate's word to
// be 0; the host makes it 1 for the length of its access calls, so at most one piece is in flight
// while they run (why and what it costs: docs/analysis/swap-notes.md, "The copy gate").
constexpr uint64_t kGatePiece = 8ull << 20;
}  // namespace

Marks& marks() {
  static NoDestructor<Marks> m;
  return *m;
}

bool record(Mark& m, CUstream stream) {
  m.stream = stream;
  if (call_real(GMS_REAL(cuEventRecord), m.event, stream) == CUDA_SUCCESS) return true;
  call_real(GMS_REAL(cuEventDestroy_v2), m.event);
  m = {};
  return false;
}

bool mark_end(Mark& m, CUstream stream) {
  if (!m.event) m = marks().take();
  return m.event && record(m, stream);
}

void gpu_wait(const Mark& m, CUstream stream, bool per_thread) {
  if (!m.event) return;
  if (call_real(GMS_REAL(cuStreamWaitEvent), driver::stream_handle(stream, per_thread), m.event, 0u) != CUDA_SUCCESS) {
    Timed t(Timing::swap_wait_ns);
    call_real(GMS_REAL(cuEventSynchronize), m.event);
  }
}

void host_wait(const Mark& m) {
  if (m.event && call_real(GMS_REAL(cuEventQuery), m.event) == CUDA_ERROR_NOT_READY) {
    Timed t(Timing::swap_wait_ns);
    call_real(GMS_REAL(cuEventSynchronize), m.event);
  }
}

CUresult copy(CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream stream, bool per_thread) {
  return per_thread ? call_real(GMS_REAL(cuMemcpyDtoDAsync_v2_ptsz), dst, src, static_cast<size_t>(n), stream)
                    : call_real(GMS_REAL(cuMemcpyDtoDAsync_v2), dst, src, static_cast<size_t>(n), stream);
}

Mark Marks::take() {
  Mark m;
  m.dev = driver::current_device();
  if (m.dev < 0 || m.dev >= kMaxDevices) return {};
  auto& pool = events[m.dev];
  if (!pool.empty()) {
    m.event = pool.back();
    pool.pop_back();
  } else if (call_real(GMS_REAL(cuEventCreate), &m.event, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
    m.event = nullptr;
  }
  return m;
}

void Marks::give(Mark& m) {
  if (m.event) events[m.dev].push_back(m.event);
  m = {};
}

void Marks::give_all(RangeMarks& r) {
  for (Mark& m : r.uses) give(m);
  r.uses.clear();
  give(r.ready);
}

uint32_t* Marks::gate(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return nullptr;
  if (!gate_tried[dev]) {
    gate_tried[dev] = true;
    void* p = nullptr;
    CUdeviceptr at = 0;
    if (call_real(GMS_REAL(cuMemHostAlloc), &p, size_t{64}, static_cast<unsigned>(CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)) ==
            CUDA_SUCCESS &&
        call_real(GMS_REAL(cuMemHostGetDevicePointer_v2), &at, p, 0u) == CUDA_SUCCESS) {
      __atomic_store_n(static_cast<uint32_t*>(p), 0u, __ATOMIC_SEQ_CST);
      gate_word[dev] = static_cast<uint32_t*>(p);
      gate_at[dev] = at;
    }
    // Else copies go ungated (and the memory, if any, stays: one word).
  }
  return gate_word[dev];
}

CUresult Marks::copy_out(CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream stream, bool per_thread, int dev) {
  for (uint64_t off = 0; off < n; off += kGatePiece) {
    if (!gate(dev)) return copy(dst + off, src + off, n - off, stream, per_thread);
    const CUresult w = per_thread
                           ? call_real(GMS_REAL(cuStreamWaitValue32_v2_ptsz), stream, gate_at[dev], cuuint32_t{0}, static_cast<unsigned>(CU_STREAM_WAIT_VALUE_EQ))
                           : call_real(GMS_REAL(cuStreamWaitValue32_v2), stream, gate_at[dev], cuuint32_t{0}, static_cast<unsigned>(CU_STREAM_WAIT_VALUE_EQ));
    if (w != CUDA_SUCCESS) {
      gate_word[dev] = nullptr;
      Line l;
      l.str("swap: the driver would not queue a wait on a host word (CUresult ").i64(w)
          .str("): copies to the host go ungated, and mapping under them is slower");
      log(LogLevel::info, l);
      return copy(dst + off, src + off, n - off, stream, per_thread);
    }
    const CUresult r = copy(dst + off, src + off, std::min(kGatePiece, n - off), stream, per_thread);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUstream Marks::copy_stream(int which) {
  const int dev = driver::current_device();
  if (dev < 0 || dev >= kMaxDevices) return nullptr;
  CUstream& st = copy_streams[dev][which];
  if (!st && call_real(GMS_REAL(cuStreamCreate), &st, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) st = nullptr;
  return st;
}

void Marks::release_all() {
  for (Mark& m : last_copies) give(m);
  for (Mark& m : last_outs) give(m);
  for (auto& pool : events) {
    for (CUevent e : pool) call_real(GMS_REAL(cuEventDestroy_v2), e);
    pool.clear();
  }
}

GateShut::GateShut(int dev) {
  Marks& m = marks();
  if (dev >= 0 && dev < kMaxDevices && m.gate_word[dev]) {
    word_ = m.gate_word[dev];
    __atomic_store_n(word_, 1u, __ATOMIC_SEQ_CST);
  }
}

GateShut::~GateShut() {
  if (word_) __atomic_store_n(word_, 0u, __ATOMIC_SEQ_CST);
}

}  // namespace gms::act::swap
