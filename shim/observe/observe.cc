#include "observe.h"

#include "core/guard.h"
#include "core/runtime.h"
#include "trace/trace.h"

namespace gms::observe {

namespace {
// Budget bookkeeping for one region coming (+1) or going (-1).
void account(const Region& r, int sign) {
  DeviceLedger& l = ledger();
  bool created = r.placement == Placement::managed || r.placement == Placement::pinned || r.placement == Placement::swap;
  // Movable memory counts where it is: the residency planner reports its device-backed bytes. The
  // program's own VMM mappings count by their handles, from creation (act/vmm.h), not where mapped.
  bool on_device = r.kind == MemKind::device && r.placement != Placement::swap;
  if (created) sign > 0 ? l.add_created(r.size) : l.sub_created(r.size);
  if (on_device) sign > 0 ? l.add_used(r.device, r.size) : l.sub_used(r.device, r.size);
}
}  // namespace

std::optional<Region> region_at(uintptr_t base) {
  ShimScope scope;
  auto r = cuda_regions().find(base);
  if (r && r->base == base) return r;
  return std::nullopt;
}

void region_alloc(Family f, bool ok, uintptr_t base, size_t size, MemKind kind, Origin origin, int device,
                  uint32_t flags, Placement placement, uintptr_t host_alias) {
  Stats& s = runtime_stats();
  s.call(f, size, ok);
  if (!ok || base == 0) return;
  ShimScope scope;
  Region r;
  r.base = base;
  r.size = size;
  r.kind = kind;
  r.origin = origin;
  r.device = device;
  r.flags = flags;
  r.placement = placement;
  r.host_alias = host_alias;
  size_t stale = cuda_regions().insert(r);
  if (stale) s.anomaly(Anomaly::stale_regions, stale);
  s.live_add(kind, size);
  account(r, +1);
  if (trace::enabled()) trace::alloc(r);
}

std::optional<Region> region_release(uintptr_t base) {
  if (base == 0) return std::nullopt;
  ShimScope scope;
  return cuda_regions().erase(base);
}

void region_released(Family f, bool ok, uintptr_t base, const std::optional<Region>& r) {
  Stats& s = runtime_stats();
  if (!ok || base == 0) {
    if (r) {
      ShimScope scope;
      cuda_regions().insert(*r);  // the free failed: the region lives on
    }
    s.call(f, 0, ok);
    return;
  }
  if (!r) {
    s.call(f, 0, ok);
    s.anomaly(Anomaly::unknown_frees);
    return;
  }
  s.call(f, r->size, ok);
  s.live_sub(r->kind, r->size);
  account(*r, -1);
  if (trace::enabled()) trace::free(f, *r);
}

void region_free(Family f, bool ok, uintptr_t base) {
  region_released(f, ok, base, ok ? region_release(base) : std::nullopt);
}

void vmm_unmap(bool ok, uintptr_t base, size_t size) {
  Stats& s = runtime_stats();
  s.call(Family::vmm, size, ok);
  if (!ok) return;
  ShimScope scope;
  cuda_regions().erase_range(base, base + size, [&](const Region& piece) {
    s.live_sub(piece.kind, piece.size);
    account(piece, -1);
    if (trace::enabled()) trace::free(Family::vmm, piece);
  });
}

void host_register(bool ok, uintptr_t base, size_t size, uint32_t flags) {
  Stats& s = runtime_stats();
  s.call(Family::host_register, size, ok);
  if (!ok) return;
  ShimScope scope;
  Region r;
  r.base = base;
  r.size = size;
  r.kind = MemKind::registered_host;
  r.origin = Origin::cuMemHostRegister;
  r.flags = flags;
  size_t stale = host_registrations().insert(r);
  if (stale) s.anomaly(Anomaly::stale_regions, stale);
  s.live_add(MemKind::registered_host, size);
  if (trace::enabled()) trace::alloc(r);
}

void host_unregister(bool ok, uintptr_t base) {
  Stats& s = runtime_stats();
  if (!ok) {
    s.call(Family::host_unregister, 0, ok);
    return;
  }
  ShimScope scope;
  auto r = host_registrations().erase(base);
  s.call(Family::host_unregister, r ? r->size : 0, ok);
  if (r) s.live_sub(MemKind::registered_host, r->size);
  if (r && trace::enabled()) trace::free(Family::host_unregister, *r);
}

void call(Family f, bool ok, uint64_t bytes) { runtime_stats().call(f, bytes, ok); }


PtrKind classify(CopyEnd end, AskDriver ask_driver) {
  if (end.side == Side::device || end.side == Side::array) return PtrKind::device;
  ShimScope scope;
  if (auto r = cuda_regions().find(end.addr)) {
    switch (r->kind) {
      case MemKind::managed:
        return PtrKind::managed;
      case MemKind::pinned_host:
        return PtrKind::pinned;
      case MemKind::device:
      case MemKind::vmm:
        // A typed host-side copy cannot name device memory; trust the call's own word.
        return end.side == Side::host ? PtrKind::pageable : PtrKind::device;
      default:
        break;
    }
  }
  if (host_registrations().find(end.addr)) return PtrKind::pinned;
  // A tracked host block is the program's ordinary memory: no need to ask the driver (one failed
  // cuPointerGetAttribute per end of every cuMemcpy cost more than a 1 MiB copy saves).
  if (end.side == Side::unified && host_blocks().find(end.addr)) return PtrKind::pageable;
  if (end.side == Side::unified && ask_driver) return ask_driver(end.addr);
  return PtrKind::pageable;
}

void copy_one(CopyEnd dst, CopyEnd src, uint64_t bytes, bool peer, AskDriver ask_driver) {
  copy_classified(classify(dst, ask_driver), classify(src, ask_driver), bytes, peer);
}

void copy_classified(PtrKind d, PtrKind k, uint64_t bytes, bool peer) {
  Stats& s = runtime_stats();
  bool d_dev = d == PtrKind::device, s_dev = k == PtrKind::device;
  Direction dir = peer ? Direction::peer
                  : (s_dev && d_dev) ? Direction::dtod
                  : s_dev            ? Direction::dtoh
                  : d_dev            ? Direction::htod
                                     : Direction::htoh;
  s.copy(dir, bytes);
  PtrKind host = s_dev ? d : k;  // the host side; for host-to-host, the source
  HostKind hk = host == PtrKind::pinned ? HostKind::pinned : host == PtrKind::managed ? HostKind::managed : HostKind::pageable;
  if (trace::enabled()) trace::copy(dir, hk, bytes);
  if (s_dev && d_dev) return;
  s.copy_host(hk, bytes);
}

void copy_call(bool ok, uint64_t bytes) { runtime_stats().call(Family::memcpy, bytes, ok); }

uint64_t new_host_serial() {
  static std::atomic<uint64_t> serials{0};
  return serials.fetch_add(1, std::memory_order_relaxed) + 1;
}

void host_block_alloc(uintptr_t base, size_t size, Origin origin, uint32_t prot, uint64_t serial) {
  Stats& s = runtime_stats();
  ShimScope scope;
  Region r;
  r.base = base;
  r.size = size;
  r.kind = MemKind::host_block;
  r.origin = origin;
  r.flags = prot;
  r.serial = serial ? serial : new_host_serial();
  size_t stale = host_blocks().insert(r);
  if (stale) s.anomaly(Anomaly::stale_regions, stale);
  s.call(Family::host_block_alloc, size, true);
  s.live_add(MemKind::host_block, size);
}

std::optional<Region> host_block_free(uintptr_t base) {
  ShimScope scope;
  auto r = host_blocks().erase(base);
  if (!r) return r;
  Stats& s = runtime_stats();
  s.call(Family::host_block_free, r->size, true);
  s.live_sub(MemKind::host_block, r->size);
  return r;
}

void host_range_gone(uintptr_t lo, uintptr_t hi) {
  ShimScope scope;
  Stats& s = runtime_stats();
  size_t bytes = host_blocks().erase_range(lo, hi, [&](const Region& piece) { s.live_sub(MemKind::host_block, piece.size); });
  if (bytes) s.call(Family::host_block_free, bytes, true);
}

}  // namespace gms::observe
