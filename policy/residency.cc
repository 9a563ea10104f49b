#include "policy/residency.h"

#include <algorithm>

namespace gms::policy {
namespace {

ResidencyConfig normalised(ResidencyConfig cfg) {
  cfg.chunk_bytes = std::clamp(cfg.chunk_bytes, ResidencyConfig::kMinChunk, ResidencyConfig::kMaxChunk);
  cfg.chunk_bytes -= cfg.chunk_bytes % ResidencyConfig::kMinChunk;
  return cfg;
}

}  // namespace

ResidencyPlanner::ResidencyPlanner(ResidencyConfig cfg) : cfg_(normalised(cfg)) {}

uint64_t ResidencyPlanner::bytes_of_chunks(const Region& r, uint64_t n) const {
  return n >= r.chunks ? r.size : n * cfg_.chunk_bytes;
}

bool ResidencyPlanner::within_window(uint64_t event_launch) const {
  return launch_ - event_launch < cfg_.pingpong_window;
}

void ResidencyPlanner::lru_unlink(Region* r) {
  (r->prev ? r->prev->next : lru_head_) = r->next;
  (r->next ? r->next->prev : lru_tail_) = r->prev;
  r->prev = r->next = nullptr;
}

void ResidencyPlanner::lru_append(Region* r) {
  r->prev = lru_tail_;
  r->next = nullptr;
  (lru_tail_ ? lru_tail_->next : lru_head_) = r;
  lru_tail_ = r;
}

void ResidencyPlanner::add_region(RegionId id, uint64_t size, uint64_t resident) {
  remove_region(id);
  Region& r = regions_[id];
  r.id = id;
  r.size = size;
  r.chunks = size / cfg_.chunk_bytes + (size % cfg_.chunk_bytes != 0);
  r.resident_chunks = resident >= size ? r.chunks : resident / cfg_.chunk_bytes;
  r.added = launch_;
  if (r.resident_chunks > 0) {
    resident_total_ += resident_of(r);
    lru_append(&r);
    r.last_ref = launch_ == 0 ? 1 : launch_;  // nonzero: in the LRU list, as the newest
  }
}

void ResidencyPlanner::remove_region(RegionId id) {
  auto it = regions_.find(id);
  if (it == regions_.end()) return;
  Region& r = it->second;
  if (r.last_ref != 0) lru_unlink(&r);
  resident_total_ -= resident_of(r);
  if (r.early_at != 0) early_away_ -= r.early_bytes;
  forget_away(r);
  if (r.armed) std::erase(armed_, id);
  regions_.erase(it);
}

void ResidencyPlanner::step_learnt() {
  // Next uses of a step no longer followed say nothing about the new one.
  for (const auto& [at, id] : away_early_) regions_.at(id).early_next_at = 0;
  away_early_.clear();
  for (auto& [id, r] : regions_) {
    r.pingpong_stopped = false;
    r.trips.clear();
    // Early evictions under way keep their bookkeeping; armed_ drops the region lazily.
    r.learned_uses = r.prev_evicted_uses = r.evicted_uses = 0;
  }
}

void ResidencyPlanner::mark_on_host(RegionId id) {
  auto it = regions_.find(id);
  if (it == regions_.end()) return;
  resident_total_ -= resident_of(it->second);
  it->second.resident_chunks = 0;
}

void ResidencyPlanner::set_shared(RegionId id, bool shared) {
  auto it = regions_.find(id);
  if (it == regions_.end()) return;
  if (shared) mark_on_host(id);
  it->second.shared = shared;
}

uint64_t ResidencyPlanner::resident_bytes(RegionId id) const {
  auto it = regions_.find(id);
  return it == regions_.end() ? 0 : resident_of(it->second);
}

bool ResidencyPlanner::stays_remote(RegionId id) const {
  auto it = regions_.find(id);
  return it != regions_.end() && (it->second.pingpong_stopped || it->second.shared || it->second.too_large_noted);
}

void ResidencyPlanner::evict_lru(uint64_t need, bool spare_referenced, std::vector<Action>& out) {
  if (need > 0 && next_) need = evict_by_next_use(need, spare_referenced, out);
  need = evict_pass(need, spare_referenced, false, out);
  evict_pass(need, spare_referenced, true, out);
}

uint64_t ResidencyPlanner::evict_from(Region& r, uint64_t need, std::vector<Action>& out) {
  // Whole chunks from its end backwards, just enough.
  uint64_t n = 0;
  for (uint64_t k = r.resident_chunks; need > 0 && k > 0; --k, ++n) {
    need -= std::min(need, bytes_of_chunks(r, k) - bytes_of_chunks(r, k - 1));
  }
  r.evicted_uses = r.uses;
  evict_chunks(r, n, out);
  return need;
}

uint64_t ResidencyPlanner::evict_pass(uint64_t need, bool spare_referenced, bool spared, std::vector<Action>& out) {
  for (Region* r = lru_head_; r != nullptr && need > 0; r = r->next) {
    if ((spare_referenced && r->seen == launch_) || r->resident_chunks == 0 || r->spared != spared) continue;
    need = evict_from(*r, need, out);
  }
  return need;
}

std::vector<std::pair<uint64_t, ResidencyPlanner::Region*>> ResidencyPlanner::farthest_first(bool spare_referenced) {
  // In recency order, then the farthest next use first (stable: the least recently used first
  // among equals).
  std::vector<std::pair<uint64_t, Region*>> known;
  for (Region* r = lru_head_; r != nullptr; r = r->next) {
    if ((spare_referenced && r->seen == launch_) || r->resident_chunks == 0) continue;
    const uint64_t next = next_->next_use(r->id);
    if (next != NextUse::kUnknown) known.push_back({next, r});
  }
  std::stable_sort(known.begin(), known.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return known;
}

uint64_t ResidencyPlanner::evict_by_next_use(uint64_t need, bool spare_referenced, std::vector<Action>& out) {
  // Regions it cannot say about come last, by recency (evict_pass).
  std::vector<std::pair<uint64_t, Region*>> known = farthest_first(spare_referenced);
  // How many of the regions next use keeps are asked whether the GPU is done with them (the
  // check of early evictions), at most.
  constexpr size_t kKeptLooked = 8;
  // First the farthest the GPU is done with, unless it is used again within kSoon launches: one it
  // may still be using is passed over (evicting it would wait for the GPU, and the program's thread
  // with it) while the bytes passed over stay within busy_lead. Each region passed over stays at
  // the price of one used again sooner: in a loop over layers the farthest is the layer just
  // queued, and passing over every busy one lets the program's lead over the GPU eat the layers
  // next use keeps.
  constexpr uint64_t kSoon = 64;
  enum : uint8_t { kLeft, kEvicted, kPassed };
  std::vector<uint8_t> fate(known.size(), kLeft);
  uint64_t passed = 0;
  size_t k = 0;
  for (; k < known.size(); ++k) {
    const auto& [next, r] = known[k];
    if (need == 0 || next < kSoon) break;
    if (next_->busy(r->id)) {
      const uint64_t bytes = resident_of(*r);
      if (passed + bytes <= cfg_.busy_lead) {
        passed += bytes;
        fate[k] = kPassed;
        continue;
      }
    }
    ++stats_.by_next_use;
    need = evict_from(*r, need, out);
    fate[k] = kEvicted;
  }
  if (need == 0 && k < known.size() && !away_early_.empty() &&
      away_early_.begin()->first < next_->now() + known[k].first + 1) {
    // The first region kept for its next use alone, not passed over for being busy: room did not
    // need any region used before it away. (None is used before the earliest: nothing to check.)
    for (size_t j = k; j < known.size() && j < k + kKeptLooked; ++j) {
      const uint64_t bytes = resident_of(*known[j].second);
      if (passed + bytes <= cfg_.busy_lead && next_->busy(known[j].second->id)) {
        passed += bytes;
        continue;
      }
      check_early(known[j].first);
      break;
    }
  }
  for (size_t j = 0; j < known.size() && need > 0; ++j) {
    if (fate[j] == kEvicted) continue;
    ++stats_.by_next_use;
    need = evict_from(*known[j].second, need, out);
  }
  return need;
}

void ResidencyPlanner::check_early(uint64_t next) {
  const uint64_t now = next_->now();
  const uint64_t kept_at = next >= NextUse::kUnknown ? UINT64_MAX : now + next + 1;  // as early_next_at
  while (!away_early_.empty() && away_early_.begin()->first < kept_at) {
    Region& r = regions_.at(away_early_.begin()->second);
    // Its use was due and it did not come back (the step changed under it): no verdict.
    const bool passed = away_early_.begin()->first <= now;
    away_early_.erase(away_early_.begin());
    r.early_next_at = 0;
    if (passed) continue;
    r.learned_uses = r.prev_evicted_uses = 0;
    ++stats_.early_excess;
    stats_.early_excess_bytes += r.early_bytes;
  }
}

void ResidencyPlanner::forget_away(Region& r) {
  if (r.early_next_at != 0) away_early_.erase({r.early_next_at, r.id});
  r.early_next_at = 0;
}

void ResidencyPlanner::evict_chunks(Region& r, uint64_t n, std::vector<Action>& out) {
  const uint64_t before = resident_of(r);
  r.resident_chunks -= n;
  const uint64_t after = resident_of(r);
  out.push_back({ActionKind::evict_to_host, r.id, after, before - after});
  r.last_evicted = launch_;
  resident_total_ -= before - after;
  stats_.evicted_bytes += before - after;
}

void ResidencyPlanner::came_back(Region& r) {
  // last_ref is still the use before this launch.
  const bool long_gap = launch_ - std::max(r.last_ref, r.added) >= cfg_.early_min_gap;
  forget_away(r);
  if (r.early_at != 0) {
    early_away_ -= r.early_bytes;
    r.early_wrong = r.early_wrong || launch_ - r.early_at < cfg_.early_min_gap;
    if (r.early_wrong || tight_ == r.tight_at_early) r.learned_uses = r.prev_evicted_uses = 0;
  } else if (r.evicted_uses != 0) {
    const uint32_t uses = long_gap ? r.evicted_uses : 0;
    r.learned_uses = !r.early_wrong && uses == r.prev_evicted_uses ? uses : 0;
    r.prev_evicted_uses = uses;
  }
  r.early_at = 0;
  r.evicted_uses = 0;
  r.uses = 0;
}

void ResidencyPlanner::note_room(uint64_t budget, uint64_t extra) {
  if (early_away_ != 0 && resident_total_ + extra + early_away_ > budget) ++tight_;
}

std::vector<RegionId> ResidencyPlanner::early_candidates(uint64_t min_idle) {
  std::vector<Region*> found;
  std::erase_if(armed_, [&](RegionId id) {
    auto it = regions_.find(id);
    if (it == regions_.end()) return true;
    Region& r = it->second;
    if (r.resident_chunks == 0 || r.learned_uses == 0 || r.uses < r.learned_uses || r.spared) {
      r.armed = false;
      return true;
    }
    if (r.seen != launch_ && launch_ - r.last_ref >= min_idle) found.push_back(&r);
    return false;
  });
  std::sort(found.begin(), found.end(), [](const Region* a, const Region* b) {
    return a->last_ref != b->last_ref ? a->last_ref < b->last_ref : a->id < b->id;
  });
  std::vector<RegionId> ids;
  ids.reserve(found.size());
  for (const Region* r : found) ids.push_back(r->id);
  return ids;
}

void ResidencyPlanner::evict_one_early(Region& r, std::vector<Action>& out) {
  const uint64_t before = resident_of(r);
  evict_chunks(r, r.resident_chunks, out);
  stats_.early_bytes += before;
  early_away_ += before;
  r.early_bytes = before;
  r.early_at = launch_;
  r.tight_at_early = tight_;
  if (next_) {
    const uint64_t next = next_->next_use(r.id);
    if (next < NextUse::kUnknown) {
      r.early_next_at = next_->now() + next + 1;  // never 0
      away_early_.insert({r.early_next_at, r.id});
    }
  }
}

std::vector<Action> ResidencyPlanner::evict_early(const std::vector<RegionId>& ids) {
  std::vector<Action> out;
  std::vector<Region*> due;
  uint64_t bytes = 0;
  for (RegionId id : ids) {
    auto it = regions_.find(id);
    if (it == regions_.end() || it->second.resident_chunks == 0 || it->second.seen == launch_) continue;
    Region* r = &it->second;
    if (std::find(due.begin(), due.end(), r) != due.end()) continue;
    // Without the step, or when the learner cannot say about it: the candidate itself.
    if (!next_ || next_->next_use(id) == NextUse::kUnknown) {
      evict_one_early(*r, out);
      continue;
    }
    due.push_back(r);
    bytes += resident_of(*r);
  }
  if (due.empty()) return out;
  // With the step known, the candidates say how much room is about to be needed and next use
  // which regions make it (see the rules). At most kQueries regions are asked whether the GPU is
  // done with them (each an event query); when they run out, next use has not said, and nothing
  // goes: asking again every launch costs the queries again, and what would go later, when the GPU
  // has caught up, goes as late as room would take it, past the victims next use would choose
  // (docs/analysis/decode-residency, "Early eviction from next use").
  constexpr size_t kQueries = 32;
  size_t queries = 0;
  bool said = true;
  for (const auto& [next, r] : farthest_first(true)) {
    if (bytes == 0 || next < cfg_.early_min_gap) break;
    if (std::find(due.begin(), due.end(), r) == due.end()) {
      if (r->spared || r->early_wrong) continue;  // spared: expected to die on the device
      if (queries++ == kQueries) {
        said = false;
        break;
      }
      if (next_->busy(r->id)) continue;
    }
    bytes -= std::min(bytes, resident_of(*r));
    evict_one_early(*r, out);
  }
  for (Region* r : due) {
    if (r->resident_chunks == 0) continue;
    // Next use keeps it (or did not say): it stays until room takes it, or until it comes back and
    // is learnt again.
    r->armed = false;
    std::erase(armed_, r->id);
    if (!said) continue;
    ++stats_.early_refused;
    stats_.early_refused_bytes += resident_of(*r);
  }
  return out;
}

void ResidencyPlanner::set_spared(RegionId id, bool spared) {
  auto it = regions_.find(id);
  if (it != regions_.end()) it->second.spared = spared;
}

void ResidencyPlanner::set_streamed(RegionId id, bool streamed) {
  auto it = regions_.find(id);
  if (it != regions_.end()) it->second.streamed = streamed;
}

uint64_t ResidencyPlanner::idle_launches(RegionId id) const {
  auto it = regions_.find(id);
  if (it == regions_.end()) return 0;
  // A region made on the device before any launch has last_ref 1 at launch 0.
  const uint64_t since = std::max(it->second.last_ref, it->second.added);
  return since < launch_ ? launch_ - since : 0;
}

std::vector<Action> ResidencyPlanner::plan_ahead(const std::vector<RegionId>& ahead, uint64_t budget) {
  std::vector<Action> actions;
  for (RegionId id : ahead) {
    auto it = regions_.find(id);
    if (it == regions_.end()) continue;
    Region& r = it->second;
    if (r.pingpong_stopped || r.shared || r.resident_chunks >= r.chunks) continue;
    const uint64_t missing = r.size - resident_of(r);
    if (resident_total_ + missing > budget) break;  // no room: the ones after it would take it
    const uint64_t offset = resident_of(r);
    actions.push_back({ActionKind::prefetch_to_device, r.id, offset, missing});
    came_back(r);
    r.resident_chunks = r.chunks;
    r.last_evicted = 0;
    resident_total_ += missing;
    stats_.prefetched_bytes += missing;
    stats_.ahead_bytes += missing;
    if (r.last_ref != 0) lru_unlink(&r);
    lru_append(&r);
    r.last_ref = launch_ == 0 ? 1 : launch_;
  }
  return actions;
}

std::vector<Action> ResidencyPlanner::plan_room(uint64_t bytes, uint64_t budget) {
  std::vector<Action> actions;
  if (bytes > budget) return actions;
  evict_lru(resident_total_ + bytes > budget ? resident_total_ + bytes - budget : 0, false, actions);
  note_room(budget, bytes);
  return actions;
}

std::vector<Action> ResidencyPlanner::plan_launch(const std::vector<RegionId>& referenced, uint64_t budget) {
  ++launch_;

  // The launch's regions, once each, in argument order. `seen == launch_` marks them referenced.
  scratch_.clear();
  for (RegionId id : referenced) {
    auto it = regions_.find(id);
    if (it == regions_.end() || it->second.seen == launch_) continue;
    it->second.seen = launch_;
    scratch_.push_back(&it->second);
  }

  // Bytes that stay on the device whatever happens: the referenced regions' resident chunks.
  uint64_t pinned = 0;
  for (const Region* r : scratch_) pinned += resident_of(*r);

  // Decide, in argument order, which referenced regions to complete on the device.
  size_t n_prefetch = 0, n_notes = 0;
  for (Region* rp : scratch_) {
    Region& r = *rp;
    r.plan = kNone;
    if (r.pingpong_stopped || r.shared || r.resident_chunks >= r.chunks) continue;
    if (r.size > budget) {
      if (!r.too_large_noted) {
        r.too_large_noted = true;
        ++stats_.too_large;
        r.plan = kNoteRemote;
        ++n_notes;
      }
      continue;
    }
    const uint64_t missing = r.size - resident_of(r);
    if (pinned > budget || missing > budget - pinned) continue;  // does not fit this launch
    if (r.streamed && resident_total_ + missing > budget) continue;  // it would evict others
    // A step that is known plans its round trips: ping-pong is for what no one can foresee.
    const bool round_trip =
        !next_ && cfg_.pingpong_window != 0 && r.last_evicted != 0 && within_window(r.last_evicted);
    if (round_trip) {
      std::erase_if(r.trips, [this](uint64_t t) { return !within_window(t); });
      if (r.trips.size() >= cfg_.pingpong_limit) {  // this one would exceed the limit
        r.pingpong_stopped = true;
        r.trips.clear();
        r.trips.shrink_to_fit();
        ++stats_.pingpong_stops;
        r.plan = kNoteRemote;
        ++n_notes;
        continue;
      }
      r.trips.push_back(launch_);
    }
    came_back(r);
    r.plan = kPrefetch;
    ++n_prefetch;
    r.plan_from = r.resident_chunks;
    r.resident_chunks = r.chunks;
    r.last_evicted = 0;
    r.too_large_noted = false;
    pinned += missing;
    resident_total_ += missing;
    stats_.prefetched_bytes += missing;
  }

  std::vector<Action> actions;
  actions.reserve(n_prefetch + n_notes);

  // Make room (or follow a shrunken budget).
  evict_lru(resident_total_ > budget ? resident_total_ - budget : 0, true, actions);

  for (const Region* r : scratch_) {
    if (r->plan != kPrefetch) continue;
    const uint64_t offset = bytes_of_chunks(*r, r->plan_from);
    actions.push_back({ActionKind::prefetch_to_device, r->id, offset, r->size - offset});
  }
  for (const Region* r : scratch_) {
    if (r->plan == kNoteRemote) actions.push_back({ActionKind::stay_remote, r->id, 0, r->size});
  }

  // The referenced regions become the most recently used, lower ids first among themselves.
  std::sort(scratch_.begin(), scratch_.end(), [](const Region* a, const Region* b) { return a->id < b->id; });
  for (Region* r : scratch_) {
    if (r->last_ref != 0) lru_unlink(r);
    lru_append(r);
    r->last_ref = launch_;
    if (r->uses != UINT32_MAX) ++r->uses;
    if (cfg_.early && r->uses == r->learned_uses && !r->armed) {
      r->armed = true;
      armed_.push_back(r->id);
    }
  }
  note_room(budget, 0);
  return actions;
}

}  // namespace gms::policy
