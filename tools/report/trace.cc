#include "report/trace.h"

namespace gms::report {

uint32_t Strings::intern(std::string_view s) {
  // The common case (a value seen before) costs one lookup and no allocation beyond the key.
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(list_.size());
  list_.emplace_back(s);
  ids_.emplace(list_.back(), id);
  return id;
}

KnownIds::KnownIds(Strings& s)
    : htod(s.intern("htod")),
      dtoh(s.intern("dtoh")),
      dtod(s.intern("dtod")),
      peer(s.intern("peer")),
      htoh(s.intern("htoh")),
      pageable(s.intern("pageable")),
      pinned(s.intern("pinned")),
      managed(s.intern("managed")),
      device(s.intern("device")),
      driver(s.intern("driver")),
      gpu_fault(s.intern("gpu_fault")),
      cpu_fault(s.intern("cpu_fault")),
      thrashing(s.intern("thrashing")),
      throttling(s.intern("throttling")),
      remote_map(s.intern("remote_map")),
      coherence(s.intern("coherence")),
      speculative(s.intern("speculative")),
      user_prefetch(s.intern("user_prefetch")),
      eviction(s.intern("eviction")),
      ok(s.intern("ok")),
      vmm(s.intern("vmm")),
      pinned_host(s.intern("pinned_host")) {}

std::string TraceFile::who() const {
  if (rank >= 0) return "rank " + std::to_string(rank);
  return "pid " + std::to_string(pid);
}

}  // namespace gms::report
