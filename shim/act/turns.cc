#include "act/turns.h"

#include <optional>

#include "act/cpu_pages.h"
#include "core/runtime.h"
#include "driver/calls.h"
#include "trace/trace.h"

namespace gms::act {
namespace {

using driver::call_real;

// Pages sampled per look, and how often one region is looked at: a round of the CPU's turns takes
// at least the time its faults take, so a look a millisecond bounds the cost (some 10 us) for a
// program that launches thousands of kernels on one region.
constexpr uint32_t kSamples = 16;
constexpr uint64_t kLookNs = 1000000;

CUresult advise(uintptr_t base, uint64_t size, CUmem_advise advice, CUmemLocation where) {
  return call_real(GMS_REAL(cuMemAdvise_v2), static_cast<CUdeviceptr>(base), static_cast<size_t>(size), advice, where);
}

CUresult to_host(uintptr_t base, uint64_t size, CUstream stream, bool per_thread) {
  const CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
  const CUdeviceptr p = static_cast<CUdeviceptr>(base);
  return per_thread ? call_real(GMS_REAL(cuMemPrefetchAsync_v2_ptsz), p, size, host, 0u, stream)
                    : call_real(GMS_REAL(cuMemPrefetchAsync_v2), p, size, host, 0u, stream);
}

}  // namespace

void TurnWatch::track(uintptr_t base, uint64_t size) {
  drop(base);
  if (size < policy::TurnsConfig{}.min_bytes) return;
  tracker_.add(base, size);
  regions_[base].size = size;
}

void TurnWatch::forget(uintptr_t base) { drop(base); }

void TurnWatch::drop(uintptr_t base) {
  tracker_.remove(base);
  auto it = regions_.find(base);
  if (it == regions_.end()) return;
  if (it->second.prefetched) call_real(GMS_REAL(cuEventDestroy_v2), it->second.prefetched);
  regions_.erase(it);
}

bool TurnWatch::advised(uintptr_t base) {
  if (regions_.find(base) == regions_.end()) return false;
  drop(base);
  return true;
}

void TurnWatch::prefetched(uintptr_t base, CUstream stream, bool per_thread) {
  auto it = regions_.find(base);
  if (it == regions_.end()) return;
  Region& r = it->second;
  if (!r.prefetched &&
      call_real(GMS_REAL(cuEventCreate), &r.prefetched, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
    r.prefetched = nullptr;
  }
  if (!r.prefetched || call_real(GMS_REAL(cuEventRecord), r.prefetched, driver::stream_handle(stream, per_thread)) != CUDA_SUCCESS) {
    drop(base);  // without it a look could read pages that have not left yet
  }
}

TurnWatch::Planner TurnWatch::before_launch(uintptr_t base, uint64_t resident, uint64_t launch, int dev, CUstream stream,
                                            bool per_thread) {
  auto it = regions_.find(base);
  if (it == regions_.end() || it->second.seen == launch) return Planner::nothing;
  Region& r = it->second;
  r.seen = launch;
  // Event queries and advice are allowed beside another thread's capture in global mode.
  std::optional<driver::RelaxedCapture> relaxed;
  PageSample look;
  // Only once the planner's last prefetch of it has run: before, the pages are still the CPU's
  // because they have not left yet (a program that queues launches ahead of the GPU), not because
  // the CPU took them back.
  if (resident != 0 && tracker_.wants_sample(base) &&
      (!r.prefetched || (relaxed.emplace(), call_real(GMS_REAL(cuEventQuery), r.prefetched) == CUDA_SUCCESS))) {
    const uint64_t now = trace::monotonic_ns();
    if (now - r.sampled_ns >= kLookNs) {
      look = sample_cpu_pages(base, resident, kSamples);
      r.sampled_ns = now;
    }
  }
  const policy::TurnAction a = tracker_.launched(base, look.cpu, look.samples, resident != 0);
  if (a == policy::TurnAction::none) return Planner::nothing;
  if (!relaxed) relaxed.emplace();
  Stats& st = runtime_stats();
  const CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0}, gpu{CU_MEM_LOCATION_TYPE_DEVICE, dev};
  const uint64_t size = r.size;
  Planner out = Planner::nothing;
  const char* what = "";
  const char* why = "";
  switch (a) {
    case policy::TurnAction::bring_back:
      st.decision(Decision::cpu_turns, resident);
      out = Planner::on_host;  // prefetched again, at the link's rate rather than on faults
      what = "cpu_turn", why = "the CPU took it back since the last launch: prefetched again, not faulted in";
      break;
    case policy::TurnAction::place_on_host:
      // What is still on the device goes to the host with it: the planner counts none of it.
      if (advise(base, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host) != CUDA_SUCCESS ||
          advise(base, size, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu) != CUDA_SUCCESS ||
          to_host(base, size, stream, per_thread) != CUDA_SUCCESS) {
        // Not placed: the region is left to the planner and no longer watched.
        advise(base, size, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, host);
        advise(base, size, CU_MEM_ADVISE_UNSET_ACCESSED_BY, gpu);
        drop(base);
        return Planner::nothing;
      }
      st.decision(Decision::shared_host, size);
      out = Planner::shared;
      what = "share_host", why = "the CPU and the GPU take turns on it: kept on the host, kernels reach it over the link";
      break;
    case policy::TurnAction::place_back:
      advise(base, size, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, host);
      advise(base, size, CU_MEM_ADVISE_UNSET_ACCESSED_BY, gpu);
      st.decision(Decision::shared_probe, size);
      out = Planner::unshared;
      what = "share_probe", why = "whether the CPU's turns go on: on the device again until the CPU takes it";
      break;
    case policy::TurnAction::none:
      break;
  }
  if (trace::enabled()) trace::decision(what, base, a == policy::TurnAction::bring_back ? resident : size, dev, why);
  return out;
}

}  // namespace gms::act
