#include "policy/turns.h"

#include <algorithm>

namespace gms::policy {

void TurnTracker::add(RegionId id, uint64_t bytes) {
  if (bytes < cfg_.min_bytes) {
    regions_.erase(id);
    return;
  }
  regions_[id] = Region{};
}

void TurnTracker::remove(RegionId id) { regions_.erase(id); }

bool TurnTracker::wants_sample(RegionId id) const {
  auto it = regions_.find(id);
  return it != regions_.end() && it->second.state != State::shared;
}

bool TurnTracker::shared(RegionId id) const {
  auto it = regions_.find(id);
  return it != regions_.end() && it->second.state == State::shared;
}

TurnAction TurnTracker::launched(RegionId id, uint32_t cpu_pages, uint32_t samples, bool on_device) {
  auto it = regions_.find(id);
  if (it == regions_.end()) return TurnAction::none;
  Region& r = it->second;
  ++r.launches;
  if (r.state == State::shared) {
    if (++r.since < r.probe_wait) return TurnAction::none;
    r.state = State::probing;
    r.since = 0;
    ++probes_;
    return TurnAction::place_back;
  }
  const bool turn = on_device && samples > 0 && cpu_pages > 0 &&
                    static_cast<double>(cpu_pages) >= cfg_.min_share * static_cast<double>(samples);
  if (!turn) {
    // A probe that the CPU answers within twice the longest gap seen between its turns.
    if (r.state == State::probing && ++r.since > 2 * r.gap) {
      r.state = State::planner;
      r.turns = 0;
      ++ended_;
    }
    return TurnAction::none;
  }
  if (r.last_turn != 0 && r.launches - r.last_turn <= cfg_.window) {
    ++r.turns;
    r.gap = std::max(r.gap, r.launches - r.last_turn);
  } else {
    r.turns = 1;
  }
  r.last_turn = r.launches;
  if (r.state == State::probing) {
    r.probe_wait = std::min(cfg_.max_probe, std::max<uint64_t>(1, r.probe_wait * 2));
  } else if (r.turns >= cfg_.turns_to_share) {
    r.probe_wait = std::max<uint64_t>(1, cfg_.first_probe);
  } else {
    return TurnAction::bring_back;
  }
  r.state = State::shared;
  r.since = 0;
  ++shares_;
  return TurnAction::place_on_host;
}

}  // namespace gms::policy
