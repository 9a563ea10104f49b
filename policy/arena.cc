#include "arena.h"

#include <algorithm>
#include <iterator>
#include <tuple>

namespace gms::policy {

Arena::Arena(const Config& c) : cfg_(c) {
  if (cfg_.granule == 0) cfg_.granule = 1;
  if (cfg_.chunk < cfg_.granule) cfg_.chunk = cfg_.granule;
  cfg_.chunk = cfg_.chunk / cfg_.granule * cfg_.granule;
  live_in_.assign(cfg_.chunks, 0);
  backing_.assign(cfg_.chunks, Backing::none);
  for (uint64_t c = 0; c < cfg_.chunks; ++c) free_[c * cfg_.chunk] = Piece{cfg_.chunk, {}};
}

Arena::Spot Arena::find(uint64_t bytes, bool device_only) const {
  if (!device_only) return find_from(bytes, false, touched_);
  if (bytes == 0) return Spot{};
  const uint64_t need = (bytes + cfg_.granule - 1) / cfg_.granule * cfg_.granule;
  return need < bytes ? Spot{} : find_stretch(need);
}

void Arena::set_backing(uint64_t chunk, Backing b) {
  const bool was_device = backing_[chunk] == Backing::device;
  backing_[chunk] = b;
  if (b != Backing::none && chunk >= touched_) touched_ = chunk + 1;
  if (was_device == (b == Backing::device)) return;
  const uint64_t lo = chunk * cfg_.chunk, hi = lo + cfg_.chunk;
  if (!was_device) {
    // Its free pieces (merged within the chunk) join the stretches they touch.
    for (auto it = free_.lower_bound(lo); it != free_.end() && it->first < hi; ++it) stretch(it->first, it->first + it->second.size);
  } else {
    unstretch(lo, hi);
  }
}

// The shortest stretch that holds `need`; of those, one whose start (or first chunk boundary, for
// a chunk or more) is aligned, then the lowest: find_from's order where nothing is unbacked.
Arena::Spot Arena::find_stretch(uint64_t need) const {
  Spot best;
  auto it = stretches_.lower_bound({need, 0});
  if (it == stretches_.end()) return best;
  const uint64_t len = it->first;
  for (; it != stretches_.end() && it->first == len; ++it) {
    const uint64_t a = it->second, b = a + len;
    const uint64_t aligned = (a + cfg_.chunk - 1) / cfg_.chunk * cfg_.chunk;
    for (uint64_t start : {aligned, a}) {
      if (start + need > b || (start != a && need < cfg_.chunk)) continue;
      if (!best.ok || std::pair(start % cfg_.chunk != 0, start) < std::pair(best.offset % cfg_.chunk != 0, best.offset)) {
        best = Spot{true, start, need, 0};
      }
    }
  }
  return best;
}

void Arena::put_stretch(uint64_t a, uint64_t b) {
  if (b <= a) return;
  stretches_.insert({b - a, a});
  stretch_at_[a] = b - a;
}

void Arena::unstretch(uint64_t lo, uint64_t hi) {
  auto it = stretch_at_.upper_bound(lo);
  if (it != stretch_at_.begin() && std::prev(it)->first + std::prev(it)->second > lo) --it;
  while (it != stretch_at_.end() && it->first < hi) {
    const uint64_t a = it->first, b = a + it->second;
    stretches_.erase({it->second, a});
    it = stretch_at_.erase(it);
    put_stretch(a, std::min(b, lo));  // (before `it`)
    if (b > hi) {
      put_stretch(hi, b);
      break;
    }
  }
}

void Arena::stretch(uint64_t lo, uint64_t hi) {
  auto left = stretch_at_.lower_bound(lo);
  if (left != stretch_at_.begin() && std::prev(left)->first + std::prev(left)->second == lo) {
    --left;
    lo = left->first;
    stretches_.erase({left->second, left->first});
    stretch_at_.erase(left);
  }
  auto right = stretch_at_.find(hi);
  if (right != stretch_at_.end()) {
    hi += right->second;
    stretches_.erase({right->second, right->first});
    stretch_at_.erase(right);
  }
  put_stretch(lo, hi);
}

Arena::Spot Arena::find_by_walk(uint64_t bytes, bool device_only) const {
  return find_from(bytes, device_only, cfg_.chunks);
}

// Chunks from `pristine` on are taken as one run to the slab's end without a look at their
// pieces: a slab spans the budget and the managed limit twice over (thousands of chunks on a large
// card), walked at every allocation (docs/design/policies.md, `auto`, what a step that fits costs).
Arena::Spot Arena::find_from(uint64_t bytes, bool device_only, uint64_t pristine) const {
  Spot best;
  if (bytes == 0) return best;
  const uint64_t need = (bytes + cfg_.granule - 1) / cfg_.granule * cfg_.granule;
  if (need < bytes) return best;
  const uint64_t tail = pristine * cfg_.chunk, slab_end = cfg_.chunks * cfg_.chunk;
  uint64_t best_len = 0;
  auto fits = [&](Backing b) { return b == Backing::device || (!device_only && b == Backing::none); };
  for (auto it = free_.begin(); it != free_.end();) {
    // A run of adjacent free pieces (they never cross a chunk boundary).
    const uint64_t at = it->first;
    uint64_t end = at + it->second.size;
    if (at >= tail) {
      end = slab_end;
      it = free_.end();
    } else {
      for (++it; it != free_.end() && it->first == end; ++it) {
        if (it->first >= tail) {
          end = slab_end;
          it = free_.end();
          break;
        }
        end += it->second.size;
      }
    }
    // Stretches of the run over chunks that may take it: a host-backed chunk splits the run.
    for (uint64_t a = at; a < end;) {
      if (device_only && a >= tail) break;  // no pristine chunk is backed
      uint64_t b = a;
      while (b < end && fits(backing_[b / cfg_.chunk])) {
        if (b >= tail) {  // every pristine chunk fits, to the end
          b = end;
          break;
        }
        b = std::min(end, (b / cfg_.chunk + 1) * cfg_.chunk);
      }
      if (b - a >= need) {
        // At the run's start, or on the first chunk boundary in it: the boundary wins when it
        // costs no more backing.
        const uint64_t aligned = (a + cfg_.chunk - 1) / cfg_.chunk * cfg_.chunk;
        for (uint64_t start : {aligned, a}) {
          if (start + need > b || (start != a && need < cfg_.chunk)) continue;
          uint64_t unbacked = 0;
          for (uint64_t c = first_chunk(start); c <= last_chunk(start, need); ++c) unbacked += backing_[c] == Backing::none;
          if (!best.ok || std::tuple(unbacked, b - a, start % cfg_.chunk != 0, start) <
                              std::tuple(best.unbacked, best_len, best.offset % cfg_.chunk != 0, best.offset)) {
            best = Spot{true, start, need, unbacked};
            best_len = b - a;
          }
        }
      }
      // Past the chunk that stopped the run.
      a = b < end ? std::min(end, (b / cfg_.chunk + 1) * cfg_.chunk) : end;
    }
  }
  return best;
}

void Arena::add_tags(std::vector<Tag>& to, const std::vector<Tag>& from, uint64_t chunk) {
  for (Tag t : from) {
    if (std::find(to.begin(), to.end(), t) != to.end()) continue;
    to.push_back(t);
    TagRuns& r = refs_[t];
    if (r.refs++ == 0) r.first_chunk = r.last_chunk = chunk;
    r.first_chunk = std::min(r.first_chunk, chunk);
    r.last_chunk = std::max(r.last_chunk, chunk);
  }
}

void Arena::unref(const std::vector<Tag>& tags, std::vector<Tag>* dropped) {
  for (Tag t : tags) {
    auto r = refs_.find(t);
    if (r == refs_.end()) continue;
    if (--r->second.refs == 0) {
      refs_.erase(r);
      if (dropped) dropped->push_back(t);
    }
  }
}

void Arena::add_live(uint64_t offset, uint64_t size, int sign, std::vector<uint64_t>* changed) {
  for (uint64_t c = first_chunk(offset); c <= last_chunk(offset, size); ++c) {
    const uint64_t lo = std::max(offset, c * cfg_.chunk), hi = std::min(offset + size, (c + 1) * cfg_.chunk);
    const uint64_t before = live_in_[c];
    live_in_[c] = sign > 0 ? before + (hi - lo) : before - (hi - lo);
    if ((before == 0) != (live_in_[c] == 0)) changed->push_back(c);
  }
}

bool Arena::take(uint64_t offset, uint64_t size, Grant* g) {
  if (size == 0 || offset % cfg_.granule || size % cfg_.granule || offset + size < offset) return false;
  const uint64_t end = offset + size;
  auto first = free_.upper_bound(offset);
  if (first == free_.begin()) return false;
  --first;
  if (first->first + first->second.size <= offset) return false;
  // Every byte must be free: the pieces from `first` on are adjacent up to `end`.
  auto last = first;
  for (uint64_t reach = first->first + first->second.size; reach < end; reach += last->second.size) {
    if (++last == free_.end() || last->first != reach) return false;
  }
  *g = Grant{};
  std::vector<std::pair<uint64_t, Piece>> rests;  // what is left on either side keeps its tags
  for (auto it = first;; ++it) {
    for (Tag t : it->second.tags) {
      if (std::find(g->waits.begin(), g->waits.end(), t) == g->waits.end()) g->waits.push_back(t);
    }
    if (it == last) break;
  }
  if (first->first < offset) rests.emplace_back(first->first, Piece{offset - first->first, first->second.tags});
  const uint64_t last_end = last->first + last->second.size;
  if (last_end > end) rests.emplace_back(end, Piece{last_end - end, last->second.tags});
  for (auto it = first;;) {
    const bool at_last = it == last;
    unref(it->second.tags, nullptr);
    it = free_.erase(it);
    if (at_last) break;
  }
  for (auto& [at, piece] : rests) {
    Piece& p = free_[at];
    p.size = piece.size;
    add_tags(p.tags, piece.tags, at / cfg_.chunk);
  }
  for (Tag t : g->waits) {
    if (!refs_.count(t)) g->dropped.push_back(t);
  }
  live_[offset] = size;
  add_live(offset, size, +1, &g->woken);
  touched_ = std::max(touched_, last_chunk(offset, size) + 1);
  unstretch(offset, end);
  return true;
}

Arena::Freed Arena::give(uint64_t offset, Tag tag) {
  Freed f;
  auto it = live_.find(offset);
  if (it == live_.end()) return f;
  f.ok = true;
  f.size = it->second;
  live_.erase(it);
  add_live(offset, f.size, -1, &f.dead);
  // One piece per chunk, each merged with its free neighbours in the same chunk: the frees a
  // chunk's space waits for are then its own, not its neighbours' (a chunk's memory goes back
  // once they are over).
  for (uint64_t c = first_chunk(offset); c <= last_chunk(offset, f.size); ++c) {
    uint64_t lo = std::max(offset, c * cfg_.chunk), hi = std::min(offset + f.size, (c + 1) * cfg_.chunk);
    Piece piece{hi - lo, {}};
    if (tag) add_tags(piece.tags, {tag}, c);
    auto next = free_.find(hi);
    if (next != free_.end() && hi % cfg_.chunk != 0) {
      add_tags(piece.tags, next->second.tags, c);
      unref(next->second.tags, nullptr);
      piece.size += next->second.size;
      free_.erase(next);
    }
    auto prev = free_.lower_bound(lo);
    if (lo % cfg_.chunk != 0 && prev != free_.begin() && (--prev, prev->first + prev->second.size == lo)) {
      add_tags(prev->second.tags, piece.tags, c);
      unref(piece.tags, nullptr);
      prev->second.size += piece.size;
    } else {
      free_[lo] = std::move(piece);
    }
  }
  for (uint64_t c = first_chunk(offset); c <= last_chunk(offset, f.size); ++c) {
    if (backing_[c] == Backing::device) stretch(std::max(offset, c * cfg_.chunk), std::min(offset + f.size, (c + 1) * cfg_.chunk));
  }
  return f;
}

void Arena::settle(Tag tag) {
  auto r = refs_.find(tag);
  if (r == refs_.end()) return;
  const uint64_t lo = r->second.first_chunk * cfg_.chunk, hi = (r->second.last_chunk + 1) * cfg_.chunk;
  refs_.erase(r);
  for (auto it = free_.lower_bound(lo); it != free_.end() && it->first < hi; ++it) std::erase(it->second.tags, tag);
}

std::vector<Arena::Tag> Arena::tags_in(uint64_t chunk) const {
  std::vector<Tag> out;
  const uint64_t lo = chunk * cfg_.chunk, hi = lo + cfg_.chunk;
  auto it = free_.upper_bound(lo);
  if (it != free_.begin()) --it;
  for (; it != free_.end() && it->first < hi; ++it) {
    if (it->first + it->second.size <= lo) continue;
    for (Tag t : it->second.tags) {
      if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    }
  }
  return out;
}

uint32_t Arena::live_granules(uint64_t chunk) const {
  const uint64_t per = cfg_.chunk / cfg_.granule;
  if (per > 32) return ~0u;
  const uint64_t lo = chunk * cfg_.chunk, hi = lo + cfg_.chunk;
  uint32_t mask = 0;
  // The allocation that starts before the chunk may reach into it; the rest start inside it.
  auto it = live_.upper_bound(lo);
  if (it != live_.begin()) --it;
  for (; it != live_.end() && it->first < hi; ++it) {
    const uint64_t a = std::max(it->first, lo), b = std::min(it->first + it->second, hi);
    if (a >= b) continue;
    const uint64_t first = (a - lo) / cfg_.granule, last = (b - lo - 1) / cfg_.granule;
    for (uint64_t g = first; g <= last; ++g) mask |= 1u << g;
  }
  return mask;
}

uint64_t Arena::size_of(uint64_t offset) const {
  auto it = live_.find(offset);
  return it == live_.end() ? 0 : it->second;
}

}  // namespace gms::policy
