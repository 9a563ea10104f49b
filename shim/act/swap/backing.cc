#include "backing.h"

#include <algorithm>
#include <atomic>

#include "act/config.h"
#include "act/swap.h"
#include "sum_mix.h"
#include "sums.h"

namespace gms::act::swap {

using driver::call_real;

namespace {

std::atomic<int64_t> g_parked{0};
std::atomic<uint64_t> g_host_made{0};  // bytes of host memory behind movable memory

CUmemAllocationProp prop(bool host, int dev) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = host ? 0 : dev;
  return p;
}

CUresult allow_device(CUdeviceptr va, uint64_t size, int dev) {
  CUmemAccessDesc d{};
  d.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  GateShut shut(dev);
  return call_real(GMS_REAL(cuMemSetAccess), va, static_cast<size_t>(size), &d, size_t{1});
}

// New memory for one chunk, without a side range.
CUresult make_backing(uint64_t size, int dev, bool host, Backing* out) {
  Backing b;
  b.size = size;
  b.dev = dev;
  b.host = host;
  CUmemAllocationProp p = prop(host, dev);
  CUresult r = call_real(GMS_REAL(cuMemCreate), &b.handle, static_cast<size_t>(size), &p, 0ull);
  if (r == CUDA_SUCCESS) *out = b;
  if (r == CUDA_SUCCESS && host) g_host_made.fetch_add(size, std::memory_order_relaxed);
  if (r == CUDA_SUCCESS) runtime_stats().decision(host ? Decision::swap_made_host : Decision::swap_made_device, size);
  return r;
}

}  // namespace

void set_parked(Chunk& c, bool parked) {
  if (c.parked != parked) g_parked.fetch_add(parked ? 1 : -1, std::memory_order_relaxed);
  c.parked = parked;
}

int64_t parked_chunks() { return g_parked.load(std::memory_order_relaxed); }

CUresult map_span(const std::vector<Piece>& pieces, int dev) {
  CUresult r = CUDA_SUCCESS;
  size_t mapped = 0;
  uint64_t total = 0;
  for (const Piece& p : pieces) {
    r = call_real(GMS_REAL(cuMemMap), p.va, static_cast<size_t>(p.size), size_t{0}, p.handle, 0ull);
    if (r != CUDA_SUCCESS) break;
    ++mapped;
    total += p.size;
  }
  if (r == CUDA_SUCCESS && total != 0) r = allow_device(pieces[0].va, total, dev);
  if (r != CUDA_SUCCESS) {
    for (size_t k = 0; k < mapped; ++k) call_real(GMS_REAL(cuMemUnmap), pieces[k].va, static_cast<size_t>(pieces[k].size));
  }
  return r;
}

CUresult map(CUdeviceptr va, uint64_t size, CUmemGenericAllocationHandle handle, int dev) {
  return map_span({Piece{va, size, handle}}, dev);
}

CUresult give_side(Backing& b) {
  if (b.side) return CUDA_SUCCESS;
  CUresult r = call_real(GMS_REAL(cuMemAddressReserve), &b.side, static_cast<size_t>(b.size), size_t{0}, CUdeviceptr{0}, 0ull);
  if (r != CUDA_SUCCESS) {
    b.side = 0;
    return r;
  }
  r = map(b.side, b.size, b.handle, b.dev);
  if (r != CUDA_SUCCESS) {
    call_real(GMS_REAL(cuMemAddressFree), b.side, static_cast<size_t>(b.size));
    b.side = 0;
  }
  if (r == CUDA_SUCCESS) runtime_stats().decision(Decision::swap_sides, b.size);
  return r;
}

void drop_backing(const Backing& b) {
  if (b.side) {
    call_real(GMS_REAL(cuMemUnmap), b.side, static_cast<size_t>(b.size));
    call_real(GMS_REAL(cuMemAddressFree), b.side, static_cast<size_t>(b.size));
  }
  call_real(GMS_REAL(cuMemRelease), b.handle);
  if (b.host) g_host_made.fetch_sub(b.size, std::memory_order_relaxed);
}

Backings& backings() {
  static NoDestructor<Backings> b;
  return *b;
}

void Backings::give_host(const Backing& h) { spare.emplace(std::pair{h.dev, h.size}, h); }

void Backings::give_device(const Backing& d) { spare_device[d.dev].push_back(d); }

uint64_t Backings::spare_bytes(int dev) const {
  uint64_t n = 0;
  for (const Backing& b : spare_device[dev]) n += b.size;
  return n;
}

void Backings::reap(bool all, const std::pair<int, uint64_t>* until) {
  // Batches of copies in and of copies out end in their own orders: one not over yet does not
  // hold up those after it.
  for (auto it = pending.begin(); it != pending.end() && !(until && spare.count(*until));) {
    Pending& p = *it;
    if (p.done.event) {
      CUresult r = all ? call_real(GMS_REAL(cuEventSynchronize), p.done.event) : call_real(GMS_REAL(cuEventQuery), p.done.event);
      if (r == CUDA_ERROR_NOT_READY) {
        ++it;
        continue;
      }
      // Any other error: the context is broken, nothing more will read them.
    }
    for (const Backing& h : p.hosts) give_host(h);
    for (const Backing& d : p.devices) give_device(d);
    marks().give(p.done);
    it = pending.erase(it);
  }
}

CUresult Backings::take_host(uint64_t size, int dev, Backing* out) {
  const std::pair<int, uint64_t> key{dev, size};
  auto it = spare.find(key);
  const bool held = std::any_of(pending.begin(), pending.end(), [&](const Pending& p) {
    return std::any_of(p.hosts.begin(), p.hosts.end(), [&](const Backing& h) { return h.dev == dev && h.size == size; });
  });
  if (it == spare.end() && held) {
    // Waiting for copies, oldest first, is cheaper than making host memory; but not for copies
    // that hold none (chunks brought in keep their host copies): that would wait for them all.
    Timed t(Timing::swap_wait_ns);
    reap(true, &key);
    it = spare.find(key);
  }
  if (it != spare.end()) {
    *out = it->second;
    spare.erase(it);
    return CUDA_SUCCESS;
  }
  Backing h;
  CUresult r = make_backing(size, dev, true, &h);
  if (r == CUDA_SUCCESS && (r = give_side(h)) != CUDA_SUCCESS) drop_backing(h);
  if (r == CUDA_SUCCESS) *out = h;
  return r;
}

CUresult Backings::take_device(uint64_t size, int dev, Backing* out) {
  auto from_spares = [&] {
    auto& pool = spare_device[dev];
    auto it = std::find_if(pool.begin(), pool.end(), [&](const Backing& b) { return b.size == size; });
    if (it == pool.end()) return false;
    *out = *it;
    pool.erase(it);
    return true;
  };
  if (from_spares()) return CUDA_SUCCESS;
  CUresult r = make_backing(size, dev, false, out);
  if (r == CUDA_ERROR_OUT_OF_MEMORY && !pending.empty()) {
    reap(true);  // evicted device memory still being copied out is spare after its copy
    r = from_spares() ? CUDA_SUCCESS : make_backing(size, dev, false, out);
  }
  return r;
}

bool Backings::has_spare_device(uint64_t size, int dev) const {
  return std::any_of(spare_device[dev].begin(), spare_device[dev].end(), [&](const Backing& b) { return b.size == size; });
}

bool Backings::take_pending_device(uint64_t size, int dev, Backing* out, Mark* after) {
  for (Pending& p : pending) {
    if (!p.done.event) continue;
    auto it = std::find_if(p.devices.begin(), p.devices.end(), [&](const Backing& b) { return b.dev == dev && b.size == size; });
    if (it == p.devices.end()) continue;
    *out = *it;
    *after = p.done;
    p.devices.erase(it);
    return true;
  }
  return false;
}

void Backings::drop_clean(Chunk& c) {
  if (c.clean.handle) give_host(c.clean);
  c.clean = {};
  give_sum_slot(c.device.dev, c.sum);
  c.sum = -1;
}

bool Backings::within_host_limit(uint64_t bytes) const {
  const uint64_t limit = placement_config().managed_limit;
  return limit == 0 || g_host_made.load(std::memory_order_relaxed) + bytes <= limit;
}

bool Backings::may_keep_clean(uint64_t bytes) { return keep_copies.keep_next() && within_host_limit(bytes); }

bool Backings::pend(std::vector<Backing>& hosts, std::vector<Backing>& devices, CUstream stream) {
  if (hosts.empty() && devices.empty()) return true;
  Pending p;
  p.done = marks().take();
  if (!(p.done.event && record(p.done, stream))) {
    marks().give(p.done);
    return false;
  }
  p.hosts = std::move(hosts);
  p.devices = std::move(devices);
  pending.push_back(std::move(p));
  hosts.clear();
  devices.clear();
  return true;
}

void Backings::give_host_after(const Backing& h, CUstream in) {
  std::vector<Backing> hosts{h}, none;
  if (pend(hosts, none, in)) return;
  wait_stream(in, false);  // no mark: after the copies, here
  give_host(h);
}

void Backings::cover(Chunk& c, uintptr_t base, uint64_t size, uintptr_t lo, uintptr_t hi) {
  if (!c.lazy()) return;
  c.valid |= pieces_covered(base, size, lo, hi);
  complete(c, size);
}

void Backings::complete(Chunk& c, uint64_t size) {
  if (!c.lazy() || (c.valid & all_pieces(size)) != all_pieces(size)) return;
  CUstream in = marks().copy_stream(1);
  if (in) {
    give_host_after(c.host, in);
  } else {
    give_host(c.host);  // no stream of copies in: nothing was filled from it
  }
  c.host = {};
  c.valid = 0;
}

void Backings::release(Chunk& c, bool keep) {
  drop_clean(c);
  if (c.lazy()) {  // its host memory: after the copies in that may fill the chunk from it
    c.valid = ~0u;
    complete(c, c.device.size);
  }
  if (c.on_device()) {
    if (keep) {
      give_device(c.device);
    } else {
      drop_backing(c.device);
      runtime_stats().decision(Decision::swap_dropped_dead, c.device.size);
    }
    c.device = {};
  } else if (c.host.handle) {
    give_host(c.host);
    c.host = {};
  }
}

void Backings::trim(int dev, uint64_t allowed) {
  auto& pool = spare_device[dev];
  for (uint64_t held = spare_bytes(dev); !pool.empty() && held > allowed;) {
    held -= pool.back().size;
    runtime_stats().decision(Decision::swap_dropped_spare, pool.back().size);
    drop_backing(pool.back());
    pool.pop_back();
  }
}

void Backings::release_all() {
  reap(true);
  for (auto& [key, h] : spare) drop_backing(h);
  spare.clear();
  for (int d = 0; d < kMaxDevices; ++d) {
    for (const Backing& b : spare_device[d]) drop_backing(b);
    spare_device[d].clear();
  }
}

uint64_t spare_device_bytes(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  std::lock_guard lock(mu());
  return backings().spare_bytes(dev);
}

void trim_spares(int dev, uint64_t allowed) {
  if (dev < 0 || dev >= kMaxDevices) return;
  ShimScope scope;
  driver::RelaxedCapture relaxed;
  std::lock_guard lock(mu());
  backings().trim(dev, allowed);
}

}  // namespace gms::act::swap
