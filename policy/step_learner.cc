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
  l.serial = ++serial_;
  l.made = count_;
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
  ++launches_;
  switch (state_) {
    case State::searching:
      search(fn, bases, n);
      break;
    case State::recording:
      record(fn, bases, n);
      break;
    case State::following:
      follow(fn, bases, n);
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

bool StepLearner::same_settled(uint64_t p, const Arg* args, size_t n) const {
  const uint64_t ring = keys_.size(), then = count_ - 1 - p, slot = then % ring;
  const Arg* before = &args_at_[slot * cfg_.max_args];
  const size_t m = nargs_at_[slot];
  // What the launch uses that was made by then must be among what the launch then used (and is
  // still alive): a layer repeated uses weights of its own, the next step's use of the same layer
  // the same ones, and a cache the launch then made is the one it now reads. What the launch then
  // used and now does not may live on (a step's loss, alive until the next step's replaces it).
  uint64_t now[64], was[64];
  size_t a = 0, b = 0;
  for (size_t k = 0; k < n && a < 64; ++k) {
    if (args[k].made <= then) now[a++] = args[k].serial;
  }
  for (size_t k = 0; k < m && b < 64; ++k) {
    auto it = live_.find(before[k].ptr);
    if (it != live_.end() && it->second.serial == before[k].serial) was[b++] = before[k].serial;
  }
  std::sort(was, was + b);
  return std::all_of(now, now + a, [&](uint64_t x) { return std::binary_search(was, was + b, x); });
}

void StepLearner::search(uint64_t fn, const uint64_t* bases, size_t n) {
  const uint64_t ring = cfg_.max_period + 1;
  if (keys_.size() != ring) {
    keys_.assign(ring, 0);
    settled_keys_.assign(ring, 0);
    fn_at_.assign(ring, 0);
    live_at_.assign(ring, 0);
    nargs_at_.assign(ring, 0);
    args_at_.clear();
  }
  // The launch's allocations, and a hash of those that have lived long (order does not matter).
  std::vector<Arg>& args = scratch_;
  args.clear();
  uint64_t settled = 0;
  for (size_t k = 0; k < n; ++k) {
    auto it = live_.find(bases[k]);
    if (it == live_.end()) continue;
    const Live& l = it->second;
    if (args.size() < cfg_.max_args) args.push_back(Arg{bases[k], l.serial, l.made});
    // Long-lived: older than half the search, so that what each step remakes (the step's own
    // memory, a cache remade a period later) drops out once the search has seen two steps.
    if (l.made == 0 || count_ - l.made >= std::max(cfg_.settled, count_ / 2)) settled += mix(l.serial, 0);
  }
  const uint64_t slot = count_ % ring;
  const uint64_t key = mix(fn, live_bytes_);
  keys_[slot] = key;
  settled_keys_[slot] = mix(mix(fn, settled), 0x5e77);
  fn_at_[slot] = fn;
  live_at_[slot] = live_bytes_;
  // Grown as the search goes: most searches end within a few thousand launches.
  if (args_at_.size() < (slot + 1) * cfg_.max_args) args_at_.resize((slot + 1) * cfg_.max_args);
  std::copy(args.begin(), args.end(), args_at_.begin() + static_cast<ptrdiff_t>(slot * cfg_.max_args));
  nargs_at_[slot] = static_cast<uint32_t>(args.size());
  ++count_;
  // Candidates hold while each launch matches the one a period before.
  uint64_t found = 0;
  for (auto it = runs_.begin(); it != runs_.end();) {
    const uint64_t p = it->first, then = (count_ - 1 - p) % ring;
    bool holds = keys_[then] == key;
    if (!holds && fn_at_[then] == fn) {
      const uint64_t a = live_at_[then], b = live_bytes_;
      holds = (a > b ? a - b : b - a) <= std::max(a, b) / std::max<uint32_t>(1, cfg_.growth_share);
    }
    holds = holds && same_settled(p, args.data(), args.size());
    if (!holds) {
      it = runs_.erase(it);
      continue;
    }
    if (++it->second >= p && p > found && distinct(p)) found = p;
    ++it;
  }
  if (count_ >= cfg_.window) {
    uint64_t h = 0, g = 0;
    for (uint64_t k = count_ - cfg_.window; k < count_; ++k) {
      h = mix(h, keys_[k % ring]);
      g = mix(g, settled_keys_[k % ring]);
    }
    propose(h);
    if (g != h) propose(g);
    // A program that never repeats keeps no more than two periods' worth of each kind of hash.
    if (seen_.size() > 4 * cfg_.max_period) seen_.clear();
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
  forget_search();
}

void StepLearner::propose(uint64_t h) {
  std::vector<uint64_t>& at = seen_[h];
  for (uint64_t q : at) {
    const uint64_t p = count_ - q;
    if (p >= cfg_.min_period && p <= cfg_.max_period && runs_.size() < cfg_.runs) runs_.emplace(p, 0);
  }
  at.push_back(count_);
  if (at.size() > cfg_.candidates) at.erase(at.begin());
}

void StepLearner::forget_search() {
  for (std::vector<uint64_t>* v : {&keys_, &settled_keys_, &fn_at_, &live_at_}) {
    v->clear();
    v->shrink_to_fit();
  }
  args_at_.clear();
  args_at_.shrink_to_fit();
  nargs_at_.clear();
  nargs_at_.shrink_to_fit();
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

void StepLearner::follow(uint64_t fn, const uint64_t* bases, size_t n) {
  if (fns_[pos_] != fn) {
    ++divergences_;
    start_over();
    search(fn, bases, n);
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
  forget_search();
  fns_.clear();
  uses_.clear();
  names_.clear();
  id_of_.clear();
  use_positions_.clear();
  death_.clear();
  ptr_of_.clear();
  made_here_.clear();
  // What is alive keeps its bytes; from now on it counts as made before any step.
  for (auto& [ptr, l] : live_) {
    l.name = Name{kOld, 0, 0, ptr};
    l.made = 0;
  }
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
