#include "slabs.h"

#include <algorithm>
#include <atomic>

#include "act/config.h"
#include "core/log.h"
#include "core/options.h"
#include "driver/budget.h"
#include "policy/residency.h"
#include "sum_mix.h"

namespace gms::act::swap {

using driver::call_real;

Slabs& slabs() {
  static NoDestructor<Slabs> s;
  return *s;
}

Slab* Slabs::slab_of(uintptr_t a) {
  for (auto& sl : slabs) {
    if (sl->holds(a)) return sl.get();
  }
  return nullptr;
}

namespace {

std::atomic<uint64_t> g_threads{0};

// The stream `use` is ordered on, when its handle can name no other stream ever: the legacy default
// stream (1), or the calling thread's per-thread default stream (a number of the thread's own,
// never given to another thread). 0: any other stream, whose handle a destroyed stream's may be.
uint64_t own_stream(const Use& use) {
  if (!use.stream_ordered) return 0;
  const CUstream s = use.stream;
  if (s == CU_STREAM_LEGACY || (s == nullptr && !use.per_thread)) return 1;
  if (s != CU_STREAM_PER_THREAD && !(s == nullptr && use.per_thread)) return 0;
  thread_local const uint64_t id = 2 + g_threads.fetch_add(1, std::memory_order_relaxed);
  return id;
}

policy::Arena::Backing backing_of(const Range& r) {
  const Chunk& c = r.chunk;
  return c.on_device() ? policy::Arena::Backing::device : c.host.handle ? policy::Arena::Backing::host : policy::Arena::Backing::none;
}
}  // namespace

void Slabs::note_backing(uintptr_t chunk, const Range& r) {
  Slab* sl = slab_of(chunk);
  if (!sl) return;
  const uint64_t c = sl->chunk_at(chunk);
  const bool was = sl->arena.backing(c) == policy::Arena::Backing::device, now = r.chunk.on_device();
  if (sl->arena.live_in(c) == 0 && was != now) {
    if (now) {
      dead_device[sl->dev] += r.size;
    } else {
      dead_device[sl->dev] -= r.size;
    }
  }
  sl->arena.set_backing(c, backing_of(r));
}

void Slabs::drop_tag(Tag t) {
  auto it = tags.find(t);
  if (it == tags.end()) return;
  marks().give(it->second.mark);
  tags.erase(it);
}

void Slabs::settle_tags() {
  while (!tag_order.empty()) {
    auto it = tags.find(tag_order.front());
    if (it != tags.end()) {
      if (call_real(GMS_REAL(cuEventQuery), it->second.mark.event) == CUDA_ERROR_NOT_READY) return;
      it->second.slab->arena.settle(it->first);
      drop_tag(it->first);
    }
    tag_order.pop_front();
  }
}

void Slabs::settle_chunk(Slab& sl, uint64_t c) {
  for (Tag t : sl.arena.tags_in(c)) {
    auto it = tags.find(t);
    if (it == tags.end()) continue;
    {
      Timed timed(Timing::swap_wait_ns);
      call_real(GMS_REAL(cuEventSynchronize), it->second.mark.event);
    }
    sl.arena.settle(t);
    drop_tag(t);
  }
}

void Slabs::wait_frees(const policy::Arena::Grant& g, const Use& use, int dev) {
  const uint64_t own = own_stream(use);
  for (Tag t : g.waits) {
    auto it = tags.find(t);
    if (it == tags.end()) continue;
    if (use.stream_ordered) {
      // The same default stream orders the use after the free by itself. Any other handle may be
      // a destroyed stream's given out again, and the per-thread default stream is one a thread.
      if (own != 0 && own == it->second.stream && dev == it->second.stream_dev) continue;
      gpu_wait(it->second.mark, use.stream, use.per_thread);
    } else {
      Timed timed(Timing::swap_wait_ns);
      call_real(GMS_REAL(cuEventSynchronize), it->second.mark.event);
    }
  }
  for (Tag t : g.dropped) drop_tag(t);
}

bool Slabs::unback(uintptr_t base, Range& range, bool keep) {
  Chunk& c = range.chunk;
  if (!c.parked && call_real(GMS_REAL(cuMemUnmap), static_cast<CUdeviceptr>(base), static_cast<size_t>(range.size)) != CUDA_SUCCESS) {
    return false;
  }
  backings().release(c, keep);
  return true;
}

void Slabs::release_dead(size_t k, bool keep) {
  const uintptr_t base = dead[k];
  dead.erase(dead.begin() + static_cast<std::ptrdiff_t>(k));
  Slab* sl = slab_of(base);
  auto it = ranges.find(base);
  if (!sl || it == ranges.end()) return;
  const uint64_t c = sl->chunk_at(base);
  settle_chunk(*sl, c);
  // Its last move's copies may still run (a copy out writing its host copy, which a new chunk may
  // be given next): the memory is free after them.
  host_wait(it->second.marks.ready);
  if (it->second.chunk.on_device()) dead_device[sl->dev] -= it->second.size;
  if (!unback(base, it->second, keep)) return;
  set_parked(it->second.chunk, false);
  marks().give_all(it->second.marks);
  ranges.erase(it);
  sl->arena.set_backing(c, policy::Arena::Backing::none);
}

void Slabs::release_dead_hosts() {
  settle_tags();
  for (size_t k = 0; k < dead.size();) {
    auto it = ranges.find(dead[k]);
    Slab* sl = slab_of(dead[k]);
    if (it != ranges.end() && sl && !it->second.chunk.on_device() && sl->arena.tags_in(sl->chunk_at(dead[k])).empty()) {
      release_dead(k);
    } else {
      ++k;
    }
  }
}

void Slabs::bury(Slab& sl, uint64_t c) {
  auto it = ranges.find(sl.chunk_base(c));
  if (it == ranges.end()) return;
  // The frees were ordered after their uses; its last move's copies may still run, which the
  // next allocation there (or its release) waits for: the ready mark stays.
  RangeMarks& rm = it->second.marks;
  for (Mark& m : rm.uses) marks().give(m);
  rm.uses.clear();
  rm.in_flight = 0;
  dead.push_back(it->first);
  if (it->second.chunk.on_device()) dead_device[sl.dev] += it->second.size;
}

CUdeviceptr Slabs::hand_out(Slab& sl, const policy::Arena::Spot& spot, const policy::Arena::Grant& g, const Use& use,
                            std::vector<Woken>* woken) {
  wait_frees(g, use, sl.dev);  // the calling thread's device: the slab is the one found for it
  wake(sl, g, woken);
  const uintptr_t lo = sl.base + spot.offset, hi = lo + spot.size;
  for (uintptr_t c = chunk_of(lo); c < hi; c += sl.arena.chunk_bytes()) {
    auto it = ranges.find(c);
    if (it != ranges.end()) backings().cover(it->second.chunk, c, it->second.size, lo, hi);
  }
  return static_cast<CUdeviceptr>(lo);
}

void Slabs::wake(Slab& sl, const policy::Arena::Grant& g, std::vector<Woken>* woken) {
  for (uint64_t c : g.woken) {
    const uintptr_t base = sl.chunk_base(c);
    auto it = ranges.find(base);
    if (it == ranges.end()) continue;
    const bool on_device = it->second.chunk.on_device();
    auto d = std::find(dead.begin(), dead.end(), base);
    if (d != dead.end()) {
      dead.erase(d);
      if (on_device) dead_device[sl.dev] -= it->second.size;
    }
    woken->push_back({base, on_device});
  }
}

std::pair<Slab*, policy::Arena::Spot> Slabs::find_spot(uint64_t bytes, int dev, bool device_only) {
  std::pair<Slab*, policy::Arena::Spot> best{nullptr, {}};
  for (auto& sl : slabs) {
    if (sl->dev != dev) continue;
    policy::Arena::Spot spot = sl->arena.find(bytes, device_only);
    if (spot.ok && (!best.first || spot.unbacked < best.second.unbacked)) best = {sl.get(), spot};
  }
  return best;
}

Slab* Slabs::new_slab(int dev, uint64_t bytes, CUresult* r) {
  const uint64_t chunk = chunk_bytes();
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  policy::Arena::Config cfg;
  cfg.chunk = chunk;
  cfg.granule = kGranule;
  cfg.chunks = chunks;
  auto sl = std::make_unique<Slab>(cfg);
  sl->dev = dev;
  // One chunk more than needed, in case the driver does not honour the alignment.
  sl->reserved_size = (chunks + 1) * chunk;
  *r = call_real(GMS_REAL(cuMemAddressReserve), &sl->reserved, static_cast<size_t>(sl->reserved_size), static_cast<size_t>(chunk),
                 CUdeviceptr{0}, 0ull);
  if (*r != CUDA_SUCCESS) return nullptr;
  sl->base = (static_cast<uintptr_t>(sl->reserved) + chunk - 1) / chunk * chunk;
  slabs.push_back(std::move(sl));
  return slabs.back().get();
}

void Slabs::release_all() {
  while (!dead.empty()) release_dead(0);
  for (auto& sl : slabs) call_real(GMS_REAL(cuMemAddressFree), sl->reserved, static_cast<size_t>(sl->reserved_size));
  slabs.clear();
  for (auto& [t, tagged] : tags) marks().give(tagged.mark);
  tags.clear();
  tag_order.clear();
}

// --- The public face (act/swap.h) of this part ---

uint64_t chunk_bytes() {
  static const uint64_t bytes = [] {
    const uint64_t asked = options().swap_chunk.bytes;
    uint64_t c = kGranule;
    while (c * 2 <= asked && c * 2 <= policy::ResidencyConfig::kMaxChunk) c *= 2;
    if (c != asked) {
      // A power of two: slabs are aligned to it.
      Line l;
      l.str("GPUMEMSHIM_SWAP_CHUNK=").bytes(asked).str(": expected a power of two from 2M to 64M; using ").bytes(c);
      log(LogLevel::warn, l);
    }
    return c;
  }();
  return bytes;
}

bool reuse(CUdeviceptr* out, uint64_t bytes, int dev, const Use& use, std::vector<Woken>* woken) {
  if (dev < 0 || dev >= kMaxDevices) return false;
  Guarded call(Timing::swap_create_ns);
  Slabs& s = slabs();
  auto [sl, spot] = s.find_spot(bytes, dev, true);
  policy::Arena::Grant g;
  if (!sl || !sl->arena.take(spot.offset, spot.size, &g)) return false;
  *out = s.hand_out(*sl, spot, g, use, woken);
  runtime_stats().decision(Decision::swap_reused, spot.size);
  return true;
}

uint64_t backing_needed(uint64_t bytes, int dev) {
  ShimScope scope;
  std::lock_guard lock(mu());
  auto [sl, spot] = slabs().find_spot(bytes, dev, false);
  const uint64_t chunk = chunk_bytes();
  return sl ? spot.unbacked * chunk : (bytes + chunk - 1) / chunk * chunk;
}

CUresult create(CUdeviceptr* out, uint64_t bytes, int dev, bool on_device, const Use& use, uint64_t slab_bytes,
                std::vector<Woken>* woken) {
  if (dev < 0 || dev >= kMaxDevices) return CUDA_ERROR_INVALID_VALUE;
  Guarded call(Timing::swap_create_ns);
  Slabs& s = slabs();
  Backings& b = backings();
  s.release_dead_hosts();
  auto [sl, spot] = s.find_spot(bytes, dev, false);
  CUresult r = CUDA_SUCCESS;
  if (!sl) {
    if (!(sl = s.new_slab(dev, std::max(slab_bytes, bytes + kGranule), &r))) return r;
    spot = sl->arena.find(bytes, false);
    if (!spot.ok) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // The chunks with no backing get theirs first, so that a failure leaves the arena as it was.
  const uint64_t chunk = sl->arena.chunk_bytes();
  std::vector<std::pair<uint64_t, Chunk>> made;
  // Scan order: device memory that a round's copies out still read (the evictions that made room
  // for this allocation, most often) rather than new memory beyond the budget; the new chunks are
  // ready after those copies (on the shim's stream for copies in, after the round's end), and
  // every use waits for that on the GPU.
  // (Pending copies exist only where the round made the shim's streams.)
  CUstream in_stream = on_device && !b.pending.empty() && scan_order() && driver::current_device() == dev ? marks().copy_stream(1) : nullptr;
  bool after_copies = false;
  for (uint64_t c = sl->arena.first_chunk(spot.offset); c <= sl->arena.last_chunk(spot.offset, spot.size) && r == CUDA_SUCCESS; ++c) {
    if (sl->arena.backing(c) != policy::Arena::Backing::none) continue;
    Chunk ch;
    Mark after;
    if (in_stream && !b.has_spare_device(chunk, dev) && b.take_pending_device(chunk, dev, &ch.device, &after)) {
      gpu_wait(after, in_stream, false);
      after_copies = true;
      runtime_stats().decision(Decision::swap_reused_pending, chunk);
    } else {
      r = on_device ? b.take_device(chunk, dev, &ch.device) : b.take_host(chunk, dev, &ch.host);
    }
    if (r == CUDA_SUCCESS) made.emplace_back(c, ch);
  }
  // Mapped in runs of neighbours: one access call each.
  std::vector<std::vector<Piece>> runs;
  for (const auto& [c, ch] : made) {
    Piece p{static_cast<CUdeviceptr>(sl->chunk_base(c)), chunk, on_device ? ch.device.handle : ch.host.handle};
    if (runs.empty() || runs.back().back().va + chunk != p.va) runs.emplace_back();
    runs.back().push_back(p);
  }
  size_t mapped = 0;
  for (; mapped < runs.size() && r == CUDA_SUCCESS; ++mapped) r = map_span(runs[mapped], dev);
  if (r != CUDA_SUCCESS) {
    for (size_t k = 0; k + 1 < mapped; ++k) {
      for (const Piece& p : runs[k]) call_real(GMS_REAL(cuMemUnmap), p.va, static_cast<size_t>(p.size));
    }
    // Memory copies out may still read is not spare before they end.
    if (after_copies) driver::sync_stream(in_stream, false);
    for (auto& [c, ch] : made) b.release(ch, true);
    return r;
  }
  Marks& mk = marks();
  bool waited = false;  // for the copies, here, when an event would not do
  auto mark_after = [&](Mark& m) {
    if (!after_copies || waited) return;
    m = mk.take();
    if (m.event && record(m, in_stream)) return;
    mk.give(m);
    Timed t(Timing::swap_wait_ns);
    driver::sync_stream(in_stream, false);
    waited = true;
  };
  if (after_copies) {
    // Work no scan sees waits for the last copies: these are now.
    Mark& last = mk.last_copies[dev];
    if (!last.event) last = mk.take();
    if (!(last.event && record(last, in_stream))) {
      Timed t(Timing::swap_wait_ns);
      driver::sync_stream(in_stream, false);
      waited = true;
    }
  }
  for (auto& [c, ch] : made) {
    Range range;
    range.size = chunk;
    range.dev = dev;
    range.chunk = ch;
    mark_after(range.marks.ready);
    s.ranges.emplace(sl->chunk_base(c), std::move(range));
    sl->arena.set_backing(c, on_device ? policy::Arena::Backing::device : policy::Arena::Backing::host);
  }
  policy::Arena::Grant g;
  sl->arena.take(spot.offset, spot.size, &g);
  *out = s.hand_out(*sl, spot, g, use, woken);
  return CUDA_SUCCESS;
}

CUresult retire(uintptr_t base, const Use& use, uint64_t keep, std::vector<uintptr_t>* dead) {
  Guarded call(Timing::swap_free_ns);
  Slabs& s = slabs();
  Marks& mk = marks();
  Slab* sl = s.slab_of(base);
  const uint64_t size = sl ? sl->arena.size_of(base - sl->base) : 0;
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  const int dev = sl->dev;
  s.settle_tags();
  Tag tag = 0;
  CUresult r = CUDA_SUCCESS;
  if (use.stream_ordered) {
    // Work queued on the stream before the free may still use the space, and the shim's copies of
    // its chunks may still run: the event marks the end of both.
    for (uintptr_t c = chunk_of(base); c < base + size; c += sl->arena.chunk_bytes()) {
      auto it = s.ranges.find(c);
      if (it != s.ranges.end()) gpu_wait(it->second.marks.ready, use.stream, use.per_thread);
    }
    Mark e = mk.take();
    if (e.event && record(e, driver::stream_handle(use.stream, use.per_thread))) {
      tag = s.next_tag++;
      const uint64_t own = own_stream(use);
      s.tags[tag] = Slabs::Tagged{e, sl, own, own ? driver::current_device() : -1};
      s.tag_order.push_back(tag);
    } else {
      mk.give(e);
      r = wait_stream(use.stream, use.per_thread);
    }
  } else {
    // A kernel queued on any stream may still use the space, which the next allocation gets.
    r = sync_context();
  }
  if (r != CUDA_SUCCESS) return r;  // the program keeps it: nothing is known to be safe
  policy::Arena::Freed f = sl->arena.give(base - sl->base, tag);
  for (uint64_t c : f.dead) {
    s.bury(*sl, c);
    dead->push_back(sl->chunk_base(c));
  }
  if (std::all_of(s.slabs.begin(), s.slabs.end(), [](const auto& x) { return x->arena.empty(); })) {
    // Every chunk, slab and tag, then every spare, then every event.
    s.release_all();
    backings().release_all();
    mk.release_all();
    return CUDA_SUCCESS;
  }
  for (size_t k = 0; k < s.dead.size() && s.dead_device[dev] > keep;) {
    auto it = s.ranges.find(s.dead[k]);
    if (it != s.ranges.end() && it->second.dev == dev && it->second.chunk.on_device()) {
      s.release_dead(k);
    } else {
      ++k;
    }
  }
  return CUDA_SUCCESS;
}

static_assert(kGranule == sum::kPiece, "an allocation covers whole pieces: a piece is live or dead");

uint32_t live_pieces(uintptr_t chunk) {
  Slab* sl = slabs().slab_of(chunk);
  return sl ? sl->arena.live_granules(sl->chunk_at(chunk)) : ~0u;
}

bool holds_nothing(uintptr_t chunk) {
  std::lock_guard lock(mu());
  Slab* sl = slabs().slab_of(chunk);
  return !sl || sl->arena.live_in(sl->chunk_at(chunk)) == 0;
}

uint64_t retired_device_bytes(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  std::lock_guard lock(mu());
  return slabs().dead_device[dev];
}

void release_retired(int dev, uint64_t device_bytes, uint64_t keep_spare) {
  if (dev < 0 || dev >= kMaxDevices) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  std::lock_guard lock(mu());
  Slabs& s = slabs();
  uint64_t freed = 0;
  for (size_t k = 0; k < s.dead.size() && freed < device_bytes;) {
    auto it = s.ranges.find(s.dead[k]);
    if (it == s.ranges.end() || it->second.dev != dev || !it->second.chunk.on_device()) {
      ++k;
      continue;
    }
    freed += it->second.size;
    s.release_dead(k, backings().spare_bytes(dev) < keep_spare);
  }
}

uint64_t taken(int dev) { return ledger().used(dev) + ledger().resident(dev) + retired_device_bytes(dev); }

void fit_spares(int dev, uint64_t more) {
  const uint64_t limit = budget::limit(dev), held = taken(dev) + more;
  trim_spares(dev, limit > held ? limit - held : 0);
}

}  // namespace gms::act::swap
