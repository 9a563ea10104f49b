#include "policy/step_learner.h"

#include <algorithm>

namespace gms::policy {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xbf58476d1ce4e5b9ull;
}

}  // namespace

size_t StepLearner::NameHash::operator()(const Name& n) const {
  return static_cast<size_t>(mix(mix(mix(n.born, n.bytes), n.k), n.ptr));
}

StepLearner::StepLearner(StepLearnerConfig cfg) : cfg_(cfg) {
  cfg_.window = std::max<uint32_t>(1, cfg_.window);
  cfg_.candidates = std::max<uint32_t>(1, cfg_.candidates);
  cfg_.min_period = std::max<uint64_t>(1, cfg_.min_period);
}

void StepLearner::made(uint64_t ptr, uint64_t bytes) {
  Live l;
  l.bytes = bytes;
  if (state_ == State::searching) {
    l.name.ptr = ptr;
  } else {
    l.name.born = pos_ % std::max<uint64_t>(period_, 1);
    l.name.bytes = bytes;
    l.name.k = made_here_[bytes]++;
    ptr_of_[l.name] = ptr;
  }
  if (auto old = live_.find(ptr); old != live_.end()) live_bytes_ -= old->second.bytes;  // freed unseen
  live_[ptr] = l;
  live_bytes_ += bytes;
}

void StepLearner::freed(uint64_t ptr) {
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  const Name name = it->second.name;
  live_bytes_ -= it->second.bytes;
  live_.erase(it);
  if (auto p = ptr_of_.find(name); p != ptr_of_.end() && p->second == ptr) ptr_of_.erase(p);
  if (state_ == State::recording && name.born != kOld) death_[id(name)] = pos_ % period_;
}

void StepLearner::launched(uint64_t fn, const uint64_t* bases, size_t n) {
  switch (state_) {
    case State::searching:
      search(fn);
      break;
    case State::recording:
      record(fn, bases, n);
      break;
    case State::following:
      follow(fn);
      break;
  }
}

bool StepLearner::distinct(uint64_t p) const {
  const uint64_t ring = keys_.size();
  std::vector<uint64_t> seen;
  for (uint64_t k = 0; k < p && seen.size() < cfg_.min_distinct; ++k) {
    const uint64_t key = keys_[(count_ - 1 - k) % ring];
    if (std::find(seen.begin(), seen.end(), key) == seen.end()) seen.push_back(key);
  }
  return seen.size() >= cfg_.min_distinct;
}

void StepLearner::search(uint64_t fn) {
  const uint64_t ring = cfg_.max_period + 1;
  if (keys_.size() != ring) keys_.assign(ring, 0);
  const uint64_t key = mix(fn, live_bytes_);
  keys_[count_ % ring] = key;
  ++count_;
  // Candidates hold while each key equals the one a period before.
  uint64_t found = 0;
  for (auto it = runs_.begin(); it != runs_.end();) {
    const uint64_t p = it->first;
    if (keys_[(count_ - 1 - p) % ring] != key) {
      it = runs_.erase(it);
      continue;
    }
    if (++it->second >= p && p > found && distinct(p)) found = p;
    ++it;
  }
  if (count_ >= cfg_.window) {
    uint64_t h = 0;
    for (uint64_t k = count_ - cfg_.window; k < count_; ++k) h = mix(h, keys_[k % ring]);
    std::vector<uint64_t>& at = seen_[h];
    for (uint64_t q : at) {
      const uint64_t p = count_ - q;
      if (p >= cfg_.min_period && p <= cfg_.max_period && runs_.size() < cfg_.runs) runs_.emplace(p, cfg_.window);
    }
    at.push_back(count_);
    if (at.size() > cfg_.candidates) at.erase(at.begin());
    // A program that never repeats keeps no more than two periods' worth of hashes.
    if (seen_.size() > 2 * cfg_.max_period) seen_.clear();
  }
  if (found == 0) return;
  // A step: record the next two.
  period_ = found;
  state_ = State::recording;
  pos_ = 0;
  recorded_ = 0;
  made_here_.clear();
  fns_.assign(period_, 0);
  uses_.assign(period_, {});
  keys_.clear();
  keys_.shrink_to_fit();
  seen_.clear();
  runs_.clear();
}

uint32_t StepLearner::id(const Name& n) {
  auto [it, fresh] = id_of_.emplace(n, static_cast<uint32_t>(names_.size()));
  if (fresh) {
    names_.push_back(n);
    use_positions_.emplace_back();
    death_.push_back(kNever);
  }
  return it->second;
}

void StepLearner::record(uint64_t fn, const uint64_t* bases, size_t n) {
  const uint64_t p = recorded_ % period_;
  if (recorded_ < period_) {
    fns_[p] = fn;
  } else if (fns_[p] != fn) {
    start_over();  // the second step is not the first: no step after all
    return;
  } else {
    std::vector<uint32_t>& u = uses_[p];
    for (size_t k = 0; k < n; ++k) {
      auto it = live_.find(bases[k]);
      if (it == live_.end()) continue;
      const uint32_t i = id(it->second.name);
      if (std::find(u.begin(), u.end(), i) == u.end()) u.push_back(i);
    }
  }
  ++recorded_;
  advance();
  if (recorded_ < 2 * period_) return;
  // What is alive now and went unused in the step is known too: never used (the step's first
  // victims), not unknown.
  for (const auto& [ptr, l] : live_) id(l.name);
  for (uint64_t q = 0; q < period_; ++q) {
    for (uint32_t i : uses_[q]) use_positions_[i].push_back(q);
  }
  state_ = State::following;
  pos_ = 0;
}

void StepLearner::follow(uint64_t fn) {
  if (fns_[pos_] != fn) {
    ++divergences_;
    start_over();
    search(fn);
    return;
  }
  advance();
}

void StepLearner::advance() {
  pos_ = (pos_ + 1) % period_;
  made_here_.clear();
}

void StepLearner::start_over() {
  state_ = State::searching;
  period_ = 0;
  pos_ = 0;
  count_ = 0;
  keys_.clear();
  seen_.clear();
  runs_.clear();
  fns_.clear();
  uses_.clear();
  names_.clear();
  id_of_.clear();
  use_positions_.clear();
  death_.clear();
  ptr_of_.clear();
  made_here_.clear();
  // What is alive keeps its bytes; from now on it counts as made before any step.
  for (auto& [ptr, l] : live_) l.name = Name{kOld, 0, 0, ptr};
}

uint64_t StepLearner::next_need(uint64_t ptr) const {
  const uint64_t use = next_use(ptr);
  if (use != kNever) return use;
  auto it = live_.find(ptr);
  auto id = it == live_.end() ? id_of_.end() : id_of_.find(it->second.name);
  if (id == id_of_.end() || death_[id->second] == kNever) return kNever;
  return ahead_of(death_[id->second]);
}

uint64_t StepLearner::next_use(uint64_t ptr) const {
  if (state_ != State::following) return kUnknown;
  auto it = live_.find(ptr);
  if (it == live_.end()) return kUnknown;
  auto id = id_of_.find(it->second.name);
  if (id == id_of_.end()) return kUnknown;
  const std::vector<uint64_t>& at = use_positions_[id->second];
  if (at.empty()) return kNever;
  auto next = std::lower_bound(at.begin(), at.end(), pos_);
  const uint64_t use = ahead_of(next == at.end() ? at.front() : *next);
  const uint64_t death = death_[id->second];
  // Freed (at the launch at `death`, before it runs) no later than that use: not used again.
  if (death != kNever && ahead_of(death) <= use) return kNever;
  return use;
}

void StepLearner::uses_ahead(uint64_t ahead, std::vector<uint64_t>* bases) const {
  bases->clear();
  if (state_ != State::following) return;
  for (uint32_t i : uses_[(pos_ + ahead) % period_]) {
    const Name& n = names_[i];
    if (n.born == kOld) {
      if (live_.count(n.ptr)) bases->push_back(n.ptr);
    } else if (auto p = ptr_of_.find(n); p != ptr_of_.end()) {
      bases->push_back(p->second);
    }
  }
}

}  // namespace gms::policy
