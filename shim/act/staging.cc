#include "staging.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/guard.h"
#include "core/runtime.h"
#include "driver/calls.h"
#include "trace/trace.h"

namespace gms::act {
namespace {

using driver::call_real;

constexpr size_t kChunk = 16u << 20;  // a DMA of 16 MiB runs near the link's peak
constexpr int kBuffers = 4;           // chunks in flight: enough to overlap copy and DMA both ways

// A fixed set of threads that copy slices of one memcpy in parallel; the caller does a slice too.
// A copy names how many take part (its width). Copies between host buffers alone use them all:
// first touches of fresh pages scale with threads (4 GiB into new huge pages: 0.19 to 0.29 s with
// 8 threads, 0.14 s with 15, on the H100 machine's 16 cores). A staged copy's chunks use fewer
// (Engine::staged_width): its crew copies run beside the copy engine's reads of host memory.
class CopyCrew {
 public:
  explicit CopyCrew(int helpers) {
    // Started with every signal blocked: the program's signals are for the program's threads.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this, i] { run(i + 1); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    size_ = helpers + 1;
  }

  int size() const { return size_; }

  // src == nullptr: the first touch of dst's pages instead (a zero written to each 4 KiB page).
  void copy(void* dst, const void* src, size_t n, int width) {
    std::unique_lock lock(mu_);
    dst_ = static_cast<char*>(dst);
    src_ = static_cast<const char*>(src);
    n_ = n;
    width_ = std::clamp(width, 1, size_);
    pending_ = width_ - 1;
    bool helped = pending_ > 0;  // read here: once unlocked, the helpers count pending_ down
    ++round_;
    lock.unlock();
    if (helped) go_.notify_all();
    slice(0);
    lock.lock();
    done_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void slice(int i) {
    // Slices on 4 KiB boundaries, so no two threads write one page.
    size_t per = ((n_ / width_) + 4095) & ~size_t{4095};
    size_t lo = per * i, hi = std::min(n_, lo + per);
    if (lo >= hi) return;
    if (src_) {
      std::memcpy(dst_ + lo, src_ + lo, hi - lo);
    } else {
      for (size_t o = lo; o < hi; o += 4096) static_cast<volatile char*>(dst_)[o] = 0;
    }
  }

  void run(int i) {
    ShimScope scope;  // its allocations are the shim's own
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock lock(mu_);
      go_.wait(lock, [&] { return round_ != seen && i < width_; });
      seen = round_;
      lock.unlock();
      slice(i);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex mu_;
  std::condition_variable go_, done_;
  std::vector<std::thread> threads_;
  int size_ = 1;
  int width_ = 1;  // of the round under way
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  size_t n_ = 0;
  int pending_ = 0;
  uint64_t round_ = 0;
};

struct Engine {
  std::mutex mu;  // one staged copy at a time: they share the buffers and the crew
  void* buffers[kBuffers] = {};
  std::unordered_map<CUcontext, std::vector<CUevent>> events;  // per context: one per buffer
  CopyCrew* crew = nullptr;
  int staged_width = 1;  // threads on each chunk of a staged copy
  int next = 0;  // the buffer the next host-to-device chunk fills
  bool broken = false;
};

Engine& engine() {
  static NoDestructor<Engine> e;
  return *e;
}

// Caller holds e.mu. The crew, started on first use; nullptr in a fork child of the process that
// started it, which has none of its threads.
CopyCrew* crew(Engine& e) {
  static pid_t started_in = 0;
  if (!e.crew) {
    unsigned cores = std::max(2u, std::thread::hardware_concurrency());
    e.crew = new CopyCrew(static_cast<int>(std::min(15u, cores - 1)));
    // A staged copy's chunks keep the width the crew had before host copies widened it: half the
    // cores, at most 8 (S2's figures in the README were measured with it).
    e.staged_width = static_cast<int>(std::min(7u, cores / 2)) + 1;
    started_in = getpid();
  }
  return started_in == getpid() ? e.crew : nullptr;
}

// Caller holds e.mu. Buffers are portable pinned memory (usable from every context); events are
// per context. Returns the events of the current context, or nullptr when staging is unavailable.
std::vector<CUevent>* ready(Engine& e) {
  if (e.broken) return nullptr;
  if (!e.buffers[0]) {
    for (auto& b : e.buffers) {
      if (call_real(GMS_REAL(cuMemHostAlloc), &b, kChunk, static_cast<unsigned>(CU_MEMHOSTALLOC_PORTABLE)) !=
          CUDA_SUCCESS) {
        e.broken = true;
        return nullptr;
      }
    }
  }
  if (!crew(e)) return nullptr;
  CUcontext ctx = nullptr;
  if (call_real(GMS_REAL(cuCtxGetCurrent), &ctx) != CUDA_SUCCESS || !ctx) return nullptr;
  auto& evs = e.events[ctx];
  if (evs.empty()) {
    evs.resize(kBuffers, nullptr);
    for (auto& ev : evs) {
      if (call_real(GMS_REAL(cuEventCreate), &ev, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
        e.events.erase(ctx);
        return nullptr;
      }
    }
  }
  return &evs;
}

// Every staging buffer's last DMA is done.
CUresult wait_all(const std::vector<CUevent>& evs) {
  for (CUevent ev : evs) {
    CUresult r = call_real(GMS_REAL(cuEventSynchronize), ev);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult dma_htod(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return call_real(GMS_REAL(cuMemcpyHtoDAsync_v2), dst, src, n, s);
}
CUresult dma_dtoh(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return call_real(GMS_REAL(cuMemcpyDtoHAsync_v2), dst, src, n, s);
}

// Caller holds e.mu. Consecutive copies start at the buffer after the last one used, so a copy
// does not wait for the DMA of the buffer its predecessor filled last.
CUresult htod_through(Engine& e, std::vector<CUevent>& evs, CUdeviceptr dst, const void* src, size_t bytes,
                      CUstream stream, bool wait, bool by_crew) {
  const char* in = static_cast<const char*>(src);
  CUresult r = CUDA_SUCCESS;
  for (size_t off = 0; off < bytes && r == CUDA_SUCCESS; off += kChunk) {
    size_t n = std::min(kChunk, bytes - off);
    int b = e.next;
    e.next = (e.next + 1) % kBuffers;
    // The buffer's previous DMA (of this copy or an earlier one) must be done before refilling it.
    if ((r = call_real(GMS_REAL(cuEventSynchronize), evs[b])) != CUDA_SUCCESS) break;
    if (by_crew) {
      e.crew->copy(e.buffers[b], in + off, n, e.staged_width);
    } else {
      std::memcpy(e.buffers[b], in + off, n);
    }
    if ((r = dma_htod(dst + off, e.buffers[b], n, stream)) != CUDA_SUCCESS) break;
    r = call_real(GMS_REAL(cuEventRecord), evs[b], stream);
  }
  if (r == CUDA_SUCCESS && wait) r = wait_all(evs);
  return r;
}

}  // namespace

CUresult staged_htod(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream, bool wait) {
  ShimScope scope;
  uint64_t t0 = trace::monotonic_ns();
  Engine& e = engine();
  std::lock_guard lock(e.mu);
  std::vector<CUevent>* evs = ready(e);
  if (!evs) return call_real(GMS_REAL(cuMemcpyHtoDAsync_v2), dst, src, bytes, stream);
  CUresult r = htod_through(e, *evs, dst, src, bytes, stream, wait, true);
  runtime_stats().time(Timing::staged_ns, trace::monotonic_ns() - t0);
  return r;
}

std::optional<CUresult> try_staged_htod(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  ShimScope scope;
  Engine& e = engine();
  std::unique_lock lock(e.mu, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  std::vector<CUevent>* evs = ready(e);
  if (!evs) return std::nullopt;
  return htod_through(e, *evs, dst, src, bytes, stream, false, false);
}

bool crew_memcpy(void* dst, const void* src, size_t bytes, IfBusy busy) {
  ShimScope scope;
  Engine& e = engine();
  std::unique_lock lock(e.mu, std::defer_lock);
  if (busy == IfBusy::wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return false;
  }
  CopyCrew* c = crew(e);
  if (!c) return false;
  c->copy(dst, src, bytes, c->size());
  return true;
}

CUresult staged_dtoh(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  ShimScope scope;
  uint64_t t0 = trace::monotonic_ns();
  Engine& e = engine();
  std::lock_guard lock(e.mu);
  std::vector<CUevent>* evs = ready(e);
  if (!evs) return call_real(GMS_REAL(cuMemcpyDtoHAsync_v2), dst, src, bytes, stream);
  char* out = static_cast<char*>(dst);
  size_t chunks = (bytes + kChunk - 1) / kChunk;
  CUresult r = CUDA_SUCCESS;
  auto issue = [&](size_t k) {
    size_t off = k * kChunk;
    int b = static_cast<int>(k % kBuffers);
    CUresult x = dma_dtoh(e.buffers[b], src + off, std::min(kChunk, bytes - off), stream);
    return x == CUDA_SUCCESS ? call_real(GMS_REAL(cuEventRecord), (*evs)[b], stream) : x;
  };
  // Earlier staged copies may still be reading a buffer (host to device): wait for all first.
  if ((r = wait_all(*evs)) != CUDA_SUCCESS) return r;
  for (size_t k = 0; k < chunks && k < kBuffers && r == CUDA_SUCCESS; ++k) r = issue(k);
  for (size_t k = 0; k < chunks && r == CUDA_SUCCESS; ++k) {
    int b = static_cast<int>(k % kBuffers);
    if ((r = call_real(GMS_REAL(cuEventSynchronize), (*evs)[b])) != CUDA_SUCCESS) break;
    size_t off = k * kChunk;
    e.crew->copy(out + off, e.buffers[b], std::min(kChunk, bytes - off), e.staged_width);
    if (k + kBuffers < chunks) r = issue(k + kBuffers);
  }
  runtime_stats().time(Timing::staged_ns, trace::monotonic_ns() - t0);
  return r;
}

}  // namespace gms::act
