#include "round.h"

#include <algorithm>

#include "act/config.h"
#include "core/log.h"
#include "core/options.h"
#include "fill.h"
#include "sum_mix.h"
#include "sums.h"

namespace gms::act::swap {

using driver::call_real;

namespace {

void say(const char* what, CUresult r, uint64_t bytes) {
  Line l;
  l.str("swap: ").str(what).str(" of ").bytes(bytes).str(" failed (CUresult ").i64(r).str("): the data stays where it was");
  log(LogLevel::warn, l);
}

void say_lost(uint64_t size, CUdeviceptr va) {
  Line l;
  l.str("swap: could not map ").bytes(size).str(" back at ").hex(va).str(": that part of the range is gone");
  log(LogLevel::error, l);
}

void fail(Move& m, const char* what, CUresult r, uint64_t n) {
  say(what, r, n);
  if (m.result == CUDA_SUCCESS) m.result = r;
}

// Remaps in runs of neighbouring chunks (one map and one access call a run): `admit(item, flush)`
// unmaps one and says whether it joins the run; on a failure it flushes the run so far (so a run
// never spans the failed chunk), handles the failure and says no. `map_run(run)` maps a run.
template <typename T, typename Admit, typename MapRun>
void in_runs(std::vector<T>& items, Admit admit, MapRun map_run) {
  std::vector<T*> run;
  auto flush = [&] {
    if (run.empty()) return;
    map_run(run);
    run.clear();
  };
  for (T& x : items) {
    if (!run.empty() && !x.at.follows(run.back()->at)) flush();
    if (admit(x, flush)) run.push_back(&x);
  }
  flush();
}

}  // namespace

bool plan(Round& round) {
  Slabs& s = slabs();
  Backings& b = backings();
  b.reap(false);
  for (Move& m : round.moves) {
    auto it = s.ranges.find(m.base);
    if (it == s.ranges.end()) {
      m.result = CUDA_ERROR_INVALID_VALUE;
      continue;
    }
    Range& range = it->second;
    Slot at{&m, &range};  // a region is one chunk: a move is all of it
    if (m.to_device) {
      if (!range.chunk.on_device()) round.ins.push_back({at, {}, range.chunk.parked});
      continue;
    }
    if (!range.chunk.on_device()) continue;
    Chunk& c = range.chunk;
    if (c.lazy()) {  // its host memory holds what the device does not: the pieces it holds go there
      Round::Out o{};
      o.at = at;
      o.host = c.host;
      o.changed = c.valid;
      o.lazy = true;
      round.outs.push_back(o);
      continue;
    }
    Backing h;
    Timed t(Timing::swap_backing_ns);
    CUresult r = give_side(range.chunk.device);
    const bool kept = r == CUDA_SUCCESS && c.clean.handle;
    if (kept) {  // the round owns the kept copy now: whatever happens, the chunk has none after it
      h = c.clean;
      c.clean = {};
    } else if (r == CUDA_SUCCESS) {
      r = b.take_host(range.size, range.dev, &h);
    }
    if (r != CUDA_SUCCESS) {
      b.drop_clean(c);
      fail(m, "eviction", r, range.size);
      continue;
    }
    Round::Out o{};
    o.at = at;
    o.host = h;
    o.sum = kept ? c.sum : -1;
    o.salt = c.salt;
    round.outs.push_back(o);
    c.sum = -1;
  }
  return !round.outs.empty() || !round.ins.empty();
}

void pick_streams(Round& round, CUstream stream, bool per_thread) {
  // Both orders copy on the shim's streams, out and in on different copy engines at once (the
  // link carries both directions at full rate), each copy in of reused device memory after that
  // memory's copy out. Context order then waits for both on the host; scan order does not:
  // whatever uses the ranges next waits for them on the GPU (ready).
  round.out_stream = round.in_stream = stream;
  round.out_pt = round.in_pt = per_thread;
  Marks& mk = marks();
  CUstream o = mk.copy_stream(0), i = o ? mk.copy_stream(1) : nullptr;
  if (i) {  // else the round copies on the launch's stream, in context order
    round.out_stream = o;
    round.in_stream = i;
    round.out_pt = round.in_pt = false;
    round.apart = true;
    round.scan = scan_order();
  }
  // Scan order parks evicted chunks (Chunk::parked) when asked: only it sees every use before it
  // happens (GPUMEMSHIM_SWAP_PARK tells the price).
  round.park = round.scan && options().swap_park.value && options().prefetch != Prefetch::off;
}

bool wait_for_work(Round& round) {
  // Under context order nothing queued anywhere, on any stream; under scan order none of the uses
  // the scan saw.
  if (round.scan) {
    for (const Round::Out& o : round.outs) round.touched.push_back(o.at.range);
    for (const Round::In& in : round.ins) round.touched.push_back(in.at.range);
    std::sort(round.touched.begin(), round.touched.end());
    round.touched.erase(std::unique(round.touched.begin(), round.touched.end()), round.touched.end());
  }
  CUresult r = round.scan ? wait_for_uses(round.touched) : sync_context();
  if (r == CUDA_SUCCESS) return true;
  // A kept copy (sum set) is left to leak: nothing waited for its copy in, which may still read it.
  for (Round::Out& o : round.outs) {
    if (o.sum < 0 && !o.lazy) backings().give_host(o.host);
  }
  for (Move& m : round.moves) fail(m, m.to_device ? "prefetch" : "eviction", r, m.bytes);
  return false;
}

namespace {

// The chunks that kept their host copy are summed again on the checks' stream, after their copy
// in (ready) and, as the round waited for them, their uses; the same sum as they came in with
// means the copy is still right. The host waits for the sums alone, not for the copies out queued
// before them.
void check_unchanged(Round& round) {
  Marks& mk = marks();
  if (std::none_of(round.outs.begin(), round.outs.end(), [](const Round::Out& o) { return o.sum >= 0; })) return;
  CUstream st = round.scan ? mk.copy_stream(2) : nullptr;
  std::vector<std::pair<Round::Out*, int>> checks;
  for (Round::Out& o : round.outs) {
    if (o.sum < 0) continue;
    const int dev = o.at.range->dev;
    const int slot = st ? take_sum_slot(dev) : -1;
    if (slot >= 0) {
      gpu_wait(o.at.range->marks.ready, st, false);
      if (queue_sum(dev, slot, o.at.chunk().device.side, o.at.size(), o.salt, st) == CUDA_SUCCESS) {
        checks.push_back({&o, slot});
        continue;
      }
      // Part of the sum may be queued: its slot is left to leak, never to be found by another sum.
    }
    give_sum_slot(dev, o.sum);
    o.sum = -1;
  }
  if (checks.empty()) return;
  Mark done = mk.take();
  bool ok = done.event && record(done, st);
  if (ok) {
    Timed t(Timing::swap_wait_ns);
    ok = call_real(GMS_REAL(cuEventSynchronize), done.event) == CUDA_SUCCESS;
  }
  mk.give(done);
  for (auto& [o, slot] : checks) {
    const int dev = o->at.range->dev;
    const uint64_t *was = sum_of(dev, o->sum), *now = sum_of(dev, slot);
    if (ok) {
      o->changed = 0;
      for (unsigned k = 0; k < sum::pieces(o->at.size()); ++k) {
        if (was[2 * k] != now[2 * k] || was[2 * k + 1] != now[2 * k + 1]) o->changed |= 1u << k;
      }
    }
    if (ok) give_sum_slot(dev, slot);  // else its sum may still land there: left to leak
    give_sum_slot(dev, o->sum);
    o->sum = -1;
  }
}

}  // namespace

void copy_outs(Round& round) {
  Marks& mk = marks();
  auto& outs = round.outs;
  // Earlier rounds' copies of the ranges evicted end before their copies out start (copies in are
  // in order on their stream already).
  for (Range* range : round.touched) {
    if (std::any_of(outs.begin(), outs.end(), [&](const Round::Out& o) { return o.at.range == range; })) {
      gpu_wait(range->marks.ready, round.out_stream, round.out_pt);
    }
  }
  check_unchanged(round);
  bool events = round.apart;
  // Gated under scan order only: context order waits for its copies on the host right after the
  // remaps, where the gate costs more than it saves (docs/analysis/swap-notes.md, "The copy gate").
  std::erase_if(outs, [&](Round::Out& o) {
    const unsigned pieces = sum::pieces(o.at.size());
    o.changed &= all_pieces(o.at.size());
    // Pieces no live allocation covers are not copied: nothing reads them again.
    const uint32_t dead = o.changed & ~live_pieces(o.at.va());
    if (dead != 0) {
      runtime_stats().decision(Decision::swap_dead_pieces, uint64_t{static_cast<unsigned>(__builtin_popcount(dead))} * sum::kPiece);
      o.changed &= ~dead;
    }
    // Pieces not copied: of a lazy chunk, those it never held; of a kept copy, those still right.
    const unsigned same = pieces - static_cast<unsigned>(__builtin_popcount(o.changed | dead));
    if (same != 0) {
      const uint64_t bytes = std::min<uint64_t>(o.at.size(), uint64_t{same} * sum::kPiece);
      runtime_stats().decision(o.lazy ? Decision::swap_unfilled : Decision::swap_unchanged, bytes);
      if (!o.lazy) backings().keep_copies.left_unchanged(same, pieces);
    }
    if (o.changed == 0) return false;  // no copy, nothing to wait for: its device memory is free now
    CUresult c = CUDA_SUCCESS;
    each_run(o.changed, o.at.size(), [&](uint64_t from, uint64_t to) {
      c = mk.copy_out(o.host.side + from, o.at.chunk().device.side + from, to - from, round.out_stream, round.out_pt,
                      round.scan ? o.at.range->dev : -1);
      return c == CUDA_SUCCESS;
    });
    if (c == CUDA_SUCCESS) {
      if (events) o.copied = mk.take();
      events = events && o.copied.event && record(o.copied, driver::stream_handle(round.out_stream, round.out_pt));
      return false;
    }
    if (!o.lazy) backings().give_host(o.host);
    fail(*o.at.m, "eviction", c, o.at.size());
    return true;
  });
  if (round.apart && !events && !outs.empty()) {
    // Without events the copies in cannot wait for the copies out of the memory they reuse.
    for (Round::Out& o : outs) mk.give(o.copied);
    CUresult r = wait_stream(round.out_stream, round.out_pt);
    if (r != CUDA_SUCCESS) {
      for (Round::Out& o : outs) {
        if (!o.lazy) backings().give_host(o.host);
        fail(*o.at.m, "eviction", r, o.at.size());
      }
      outs.clear();
    }
  }
}

void remap_evictions(Round& round) {
  round.remap_start = trace::monotonic_ns();
  Marks& mk = marks();
  Slabs& s = slabs();
  // The range is backed by its host copy at once (the copy goes through the side ranges), or
  // parked; the device memory goes to the prefetches.
  auto evict_run = [&](std::vector<Round::Out*>& out_run) {
    std::vector<Piece> host;
    for (Round::Out* o : out_run) host.push_back({o->at.va(), o->at.size(), o->host.handle});
    // Not under a launch or transfer of another thread's that is between its await and its mark,
    // or work no scan sees: they would find nothing mapped.
    const bool parks = round.park && scan().unscanned_open == 0 &&
                       std::all_of(out_run.begin(), out_run.end(), [](const Round::Out* o) { return o->at.range->marks.in_flight == 0; });
    CUresult m = parks ? CUDA_SUCCESS : map_span(host, out_run.front()->at.range->dev);
    for (Round::Out* o : out_run) {
      Chunk& c = o->at.chunk();
      if (m == CUDA_SUCCESS) {
        round.freed.emplace(o->at.size(), Round::Freed{c.device, o->copied});
        c.device = {};
        c.host = o->host;
        set_parked(c, parks);
        s.note_backing(o->at.va(), *o->at.range);
        continue;
      }
      // Put the device memory back: it still holds the data (a lazy chunk's host memory the rest).
      if (!o->lazy) round.spent_out_hosts.push_back(o->host);
      mk.give(o->copied);
      if (map(o->at.va(), o->at.size(), c.device.handle, o->at.range->dev) != CUDA_SUCCESS) say_lost(o->at.size(), o->at.va());
      fail(*o->at.m, "eviction", m, o->at.size());
    }
  };
  auto unmap = [&](Round::Out& o, auto& flush) {
    CUresult u = call_real(GMS_REAL(cuMemUnmap), o.at.va(), static_cast<size_t>(o.at.size()));
    if (u == CUDA_SUCCESS) return true;
    flush();
    if (!o.lazy) round.spent_out_hosts.push_back(o.host);
    mk.give(o.copied);
    fail(*o.at.m, "eviction", u, o.at.size());
    return false;
  };
  in_runs(round.outs, unmap, evict_run);
}

namespace {

// A chunk brought in keeps its host copy, with the sum of what came in queued after the copy (so
// before its ready mark: nothing that uses the chunk can change it first); or the copy is spent.
void keep_clean(Round& round, Round::In& in, Chunk& c, bool keep) {
  const int dev = in.at.range->dev;
  const int slot = keep ? take_sum_slot(dev) : -1;
  // A chunk on the host keeps no copy (plan() takes it, with its sum, when the chunk leaves).
  const uint64_t salt = new_salt();
  if (slot >= 0 && queue_sum(dev, slot, in.device.side, in.at.size(), salt, round.in_stream) == CUDA_SUCCESS) {
    c.clean = c.host;
    c.sum = slot;
    c.salt = salt;
    runtime_stats().decision(Decision::swap_kept, in.at.size());
    return;
  }
  // A slot whose sum failed part way is left to leak (never found by another sum).
  round.spent_hosts.push_back(c.host);
}

}  // namespace

void remap_prefetches(Round& round) {
  Marks& mk = marks();
  Slabs& s = slabs();
  Backings& b = backings();
  // The host copy is kept until the copies are done.
  auto prefetch_run = [&](std::vector<Round::In*>& in_run) {
    std::vector<Piece> host, device;  // host: what was mapped before, to put back on failure
    for (Round::In* in : in_run) {
      if (!in->parked) host.push_back({in->at.va(), in->at.size(), in->at.chunk().host.handle});
      device.push_back({in->at.va(), in->at.size(), in->device.handle});
    }
    const int dev = in_run.front()->at.range->dev;
    CUresult m = map_span(device, dev);
    if (m != CUDA_SUCCESS && !host.empty() && map_span(host, dev) != CUDA_SUCCESS) {
      for (const Piece& h : host) {
        if (map(h.va, h.size, h.handle, dev) != CUDA_SUCCESS) say_lost(h.size, h.va);
      }
    }
    for (Round::In* in : in_run) {
      Chunk& c = in->at.chunk();
      // The host copy is whole once the copy out that made it is over (its ready mark): copies out
      // run on a stream of their own, which copies in do not follow.
      if (m == CUDA_SUCCESS) gpu_wait(in->at.range->marks.ready, round.in_stream, round.in_pt);
      // Whether it keeps its host copy (counted for each copy in), else whether it comes piece by
      // piece (act/swap/fill.h): only while the host memory made stays within the managed limit,
      // since the chunk holds on to it.
      const bool keep = round.scan && b.may_keep_clean(in->at.size());
      const bool lazy = !keep && round.scan && !in->at.m->ahead && lazy_allowed() && b.within_host_limit(in->at.size());
      CUresult r = m != CUDA_SUCCESS ? m
                   : lazy            ? CUDA_SUCCESS
                                     : copy(in->device.side, c.host.side, in->at.size(), round.in_stream, round.in_pt);
      if (r != CUDA_SUCCESS) {
        if (m == CUDA_SUCCESS) {
          // Back to the host copy, which still holds the data.
          call_real(GMS_REAL(cuMemUnmap), in->at.va(), static_cast<size_t>(in->at.size()));
          if (!in->parked && map(in->at.va(), in->at.size(), c.host.handle, dev) != CUDA_SUCCESS) say_lost(in->at.size(), in->at.va());
        }
        round.spent_devices.push_back(in->device);
        fail(*in->at.m, "prefetch", r, in->at.size());
        continue;
      }
      if (lazy) {
        c.valid = 0;  // the host memory stays with it (Chunk::lazy)
      } else {
        runtime_stats().decision(Decision::swap_in_whole, in->at.size());
        keep_clean(round, *in, c, keep);
        c.host = {};
      }
      set_parked(c, false);
      c.device = in->device;
      s.note_backing(in->at.va(), *in->at.range);
    }
  };
  auto take_and_unmap = [&](Round::In& in, auto& flush) {
    // Spare memory first, then memory an earlier round's copies out still read (its copy in waits
    // for them, which are over or nearly), then this round's evicted memory (the copy in waits for
    // its copy out): none of it beyond the budget.
    auto f = round.freed.find(in.at.size());
    const int dev = in.at.range->dev;
    const bool spare = b.has_spare_device(in.at.size(), dev);
    Mark after;
    CUresult r = CUDA_SUCCESS;
    if (!spare && round.scan && b.take_pending_device(in.at.size(), dev, &in.device, &after)) {
      gpu_wait(after, round.in_stream, round.in_pt);
      runtime_stats().decision(Decision::swap_reused_pending, in.at.size());
    } else if (!spare && f != round.freed.end()) {
      in.device = f->second.device;
      gpu_wait(f->second.copied, round.in_stream, round.in_pt);  // its copy out first
      mk.give(f->second.copied);
      round.freed.erase(f);
    } else {
      r = b.take_device(in.at.size(), in.at.range->dev, &in.device);
      if (r == CUDA_SUCCESS && (r = give_side(in.device)) != CUDA_SUCCESS) b.give_device(in.device);
      if (r != CUDA_SUCCESS) {
        flush();
        fail(*in.at.m, "prefetch", r, in.at.size());  // the device is full: this chunk stays on the host
        return false;
      }
    }
    r = in.parked ? CUDA_SUCCESS : call_real(GMS_REAL(cuMemUnmap), in.at.va(), static_cast<size_t>(in.at.size()));
    if (r == CUDA_SUCCESS) return true;
    flush();
    round.spent_devices.push_back(in.device);
    fail(*in.at.m, "prefetch", r, in.at.size());
    return false;
  };
  in_runs(round.ins, take_and_unmap, prefetch_run);
  for (auto& [size, f] : round.freed) {
    round.spent_out_devices.push_back(f.device);
    mk.give(f.copied);
  }
  round.freed.clear();
  runtime_stats().time(Timing::swap_remap_ns, trace::monotonic_ns() - round.remap_start);
}

void finish(Round& round) {
  Backings& b = backings();
  if (round.scan) {
    // The two directions stay apart: copies in never wait on the GPU for copies out but those of
    // the memory they reuse (ordered when it was taken) and those that made the host copy they
    // read (the chunk's ready mark), so a round's copies in run beside the copies out of this
    // round and the ones before (docs/design/schedule.md, "Both directions at once"). A chunk
    // brought in is ready after its own copy; an evicted chunk after the round's copies out (its
    // host copy is whole then). Spent memory is free after the copies of its direction.
    bool ok = true;
    for (Round::In& in : round.ins) {
      if (!(ok = mark_end(in.at.range->marks.ready, round.in_stream))) break;
    }
    for (Range* range : round.touched) {
      if (!ok) break;
      if (std::any_of(round.ins.begin(), round.ins.end(), [&](const Round::In& in) { return in.at.range == range; })) continue;
      ok = mark_end(range->marks.ready, round.out_stream);
    }
    const int dev = driver::current_device();
    Marks& mk = marks();
    if (ok && (ok = dev >= 0 && dev < kMaxDevices)) {
      ok = mark_end(mk.last_copies[dev], round.in_stream) && mark_end(mk.last_outs[dev], round.out_stream);
    }
    ok = ok && b.pend(round.spent_hosts, round.spent_devices, round.in_stream) &&
         b.pend(round.spent_out_hosts, round.spent_out_devices, round.out_stream);
    if (ok) return;
    // No events: wait here, as context order does.
  }
  // Other streams may use the chunks next: the copies must be over before anyone launches.
  CUresult r = wait_stream(round.in_stream, round.in_pt);
  if (r == CUDA_SUCCESS && round.apart) r = wait_stream(round.out_stream, round.out_pt);
  if (r != CUDA_SUCCESS) {
    for (Round::In& in : round.ins) fail(*in.at.m, "prefetch", r, in.at.size());
  }
  for (auto* hosts : {&round.spent_hosts, &round.spent_out_hosts}) {
    for (const Backing& h : *hosts) b.give_host(h);
  }
  for (auto* devices : {&round.spent_devices, &round.spent_out_devices}) {
    for (const Backing& d : *devices) b.give_device(d);
  }
}

void copy_ins(Round& round) {
  Backings& b = backings();
  std::multimap<uint64_t, Round::Out*> leaving;  // by size
  for (Round::Out& o : round.outs) leaving.emplace(o.at.size(), &o);
  for (Round::In& in : round.ins) {
    const int dev = in.at.range->dev;
    auto f = leaving.find(in.at.size());
    Round::Out* from = nullptr;
    CUresult r = CUDA_SUCCESS;
    if (b.spare_device[dev].empty() && f != leaving.end()) {
      from = f->second;
      leaving.erase(f);
      in.device = from->at.chunk().device;
      gpu_wait(from->copied, round.in_stream, round.in_pt);  // its copy out first
    } else {
      Timed t(Timing::swap_backing_ns);
      r = b.take_device(in.at.size(), dev, &in.device);
      if (r == CUDA_SUCCESS && (r = give_side(in.device)) != CUDA_SUCCESS) b.give_device(in.device);
    }
    if (r == CUDA_SUCCESS) r = copy(in.device.side, in.at.chunk().host.side, in.at.size(), round.in_stream, round.in_pt);
    if (r != CUDA_SUCCESS) {
      if (!from && in.device.handle) round.spent_devices.push_back(in.device);
      in.device = {};
      fail(*in.at.m, "prefetch", r, in.at.size());  // the device is full: this chunk stays on the host
      continue;
    }
    in.copied = true;
    if (from) from->lent = true;
  }
}

void remap_and_finish(Round& round) {
  Marks& mk = marks();
  Slabs& s = slabs();
  round.remap_start = trace::monotonic_ns();
  // Evictions, in runs of neighbouring chunks. On failure a chunk keeps its device memory, unless
  // a copy in took it: then its host copy is all there is, and the chunk is left parked on it.
  auto evict_run = [&](std::vector<Round::Out*>& run) {
    std::vector<Piece> host;
    for (Round::Out* o : run) host.push_back({o->at.va(), o->at.size(), o->host.handle});
    const int dev = run.front()->at.range->dev;
    CUresult m = map_span(host, dev);
    for (Round::Out* o : run) {
      Chunk& c = o->at.chunk();
      CUresult one = m == CUDA_SUCCESS || !o->lent ? m : map(o->at.va(), o->at.size(), o->host.handle, dev);
      if (one == CUDA_SUCCESS || o->lent) {
        if (!o->lent) round.spent_devices.push_back(c.device);
        c.device = {};
        c.host = o->host;
        set_parked(c, one != CUDA_SUCCESS);
        if (one != CUDA_SUCCESS) say_lost(o->at.size(), o->at.va());
        s.note_backing(o->at.va(), *o->at.range);
        continue;
      }
      if (!o->lazy) round.spent_hosts.push_back(o->host);
      if (map(o->at.va(), o->at.size(), c.device.handle, dev) != CUDA_SUCCESS) say_lost(o->at.size(), o->at.va());
      fail(*o->at.m, "eviction", m, o->at.size());
    }
  };
  auto unmap_out = [&](Round::Out& o, auto& flush) {
    if (call_real(GMS_REAL(cuMemUnmap), o.at.va(), static_cast<size_t>(o.at.size())) == CUDA_SUCCESS || o.lent) return true;
    flush();
    if (!o.lazy) round.spent_hosts.push_back(o.host);
    fail(*o.at.m, "eviction", CUDA_ERROR_UNKNOWN, o.at.size());
    return false;
  };
  in_runs(round.outs, unmap_out, evict_run);
  // Prefetches, in runs: the host copy stays mapped where mapping the device memory fails.
  auto prefetch_run = [&](std::vector<Round::In*>& in_run) {
    std::vector<Piece> device;
    for (Round::In* in : in_run) device.push_back({in->at.va(), in->at.size(), in->device.handle});
    const int dev = in_run.front()->at.range->dev;
    CUresult m = map_span(device, dev);
    for (Round::In* in : in_run) {
      Chunk& c = in->at.chunk();
      if (m == CUDA_SUCCESS) {
        round.spent_hosts.push_back(c.host);
        c.host = {};
        set_parked(c, false);
        c.device = in->device;
        s.note_backing(in->at.va(), *in->at.range);
        continue;
      }
      if (!in->parked && map(in->at.va(), in->at.size(), c.host.handle, dev) != CUDA_SUCCESS) say_lost(in->at.size(), in->at.va());
      round.spent_devices.push_back(in->device);
      fail(*in->at.m, "prefetch", m, in->at.size());
    }
  };
  auto unmap_in = [&](Round::In& in, auto& flush) {
    if (!in.copied) return false;  // its copy failed: it stays on the host, as it is
    if (in.parked || call_real(GMS_REAL(cuMemUnmap), in.at.va(), static_cast<size_t>(in.at.size())) == CUDA_SUCCESS) return true;
    flush();
    round.spent_devices.push_back(in.device);
    fail(*in.at.m, "prefetch", CUDA_ERROR_UNKNOWN, in.at.size());
    return false;
  };
  in_runs(round.ins, unmap_in, prefetch_run);
  runtime_stats().time(Timing::swap_remap_ns, trace::monotonic_ns() - round.remap_start);
  for (Round::Out& o : round.outs) mk.give(o.copied);
  // The copies must be over before anyone launches, and before their memory is reused.
  CUresult w = wait_stream(round.in_stream, round.in_pt);
  if (w == CUDA_SUCCESS) w = wait_stream(round.out_stream, round.out_pt);
  if (w != CUDA_SUCCESS) {
    // A wait fails only on a broken context: nothing the copies may still touch is reused.
    for (Round::In& in : round.ins) {
      if (in.copied) fail(*in.at.m, "prefetch", w, in.at.size());
    }
    return;
  }
  Backings& b = backings();
  for (const Backing& h : round.spent_hosts) b.give_host(h);
  for (const Backing& d : round.spent_devices) b.give_device(d);
}

// --- The public face (act/swap.h) of this part ---

void move(std::vector<Move>& moves, CUstream stream, bool per_thread) {
  if (moves.empty()) return;
  Guarded call(Timing::swap_move_ns);
  wait_for_queueing(call.lock());
  Round round(moves);
  if (!plan(round)) return;
  uint64_t bytes = 0;
  for (const Round::Out& o : round.outs) bytes += o.at.size();
  for (const Round::In& in : round.ins) bytes += in.at.size();
  runtime_stats().decision(Decision::swap_rounds, bytes);
  if (round.ins.empty()) runtime_stats().decision(Decision::swap_rounds_out_only, bytes);
  if (round.outs.empty()) runtime_stats().decision(Decision::swap_rounds_in_only, bytes);
  pick_streams(round, stream, per_thread);
  if (!wait_for_work(round)) return;
  copy_outs(round);
  if (!round.scan && round.apart) {
    copy_ins(round);
    remap_and_finish(round);
    return;
  }
  remap_evictions(round);
  remap_prefetches(round);
  finish(round);
}

}  // namespace gms::act::swap
