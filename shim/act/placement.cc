#include "placement.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "core/guard.h"
#include "core/log.h"
#include "core/runtime.h"
#include "act/census.h"
#include "act/host_alloc.h"
#include "act/made_again.h"
#include "act/residency.h"
#include "act/tables.h"
#include "act/swap.h"
#include "driver/budget.h"
#include "driver/calls.h"
#include "policy/frameworks.h"
#include "trace/trace.h"

namespace gms::act {
namespace {

using driver::call_real;
using policy::Where;

CUresult alloc_managed(CUdeviceptr* out, size_t bytes, int dev) {
  if (trace::enabled()) trace::begin();  // CUPTI sees the migrations only of memory made after it starts
  CUresult r = call_real(GMS_REAL(cuMemAllocManaged), out, bytes, static_cast<unsigned>(CU_MEM_ATTACH_GLOBAL));
  if (r != CUDA_SUCCESS) return r;
  // Lives on the host, mapped into the device: kernels read and write it over the link at once,
  // with no fault-driven migration; the residency planner moves hot parts into the budget.
  CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
  CUmemLocation gpu{CU_MEM_LOCATION_TYPE_DEVICE, dev < 0 ? 0 : dev};
  call_real(GMS_REAL(cuMemAdvise_v2), *out, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host);
  call_real(GMS_REAL(cuMemAdvise_v2), *out, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu);
  return r;
}

CUresult alloc_pinned(CUdeviceptr* out, size_t bytes, uintptr_t* host_alias) {
  void* h = nullptr;
  unsigned flags = CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE;
  // Large ones made the shim's way (act/host_alloc.h): several times faster than the driver makes
  // and frees them (docs/analysis/swap-notes.md, "Pinned spills").
  CUresult r = host_alloc(&h, bytes, flags);
  if (r != CUDA_SUCCESS) return r;
  r = call_real(GMS_REAL(cuMemHostGetDevicePointer_v2), out, h, 0u);
  if (r != CUDA_SUCCESS) {
    host_free(h);
    return r;
  }
  *host_alias = reinterpret_cast<uintptr_t>(h);
  return r;
}

// Room on the device for `bytes` more of movable memory, within the budget: spare device memory
// goes first, then freed chunks kept for reuse, then (with `evict`) evictions of the least
// recently used memory. `created`: the new chunks hold memory of their own already.
enum class Room { now, after_evictions, never };
Room room_for_swap(int dev, uint64_t bytes, bool evict, bool created = false) {
  const uint64_t limit = budget::limit(dev);
  if (ledger().used(dev) > limit || bytes > limit - ledger().used(dev)) return Room::never;
  swap::fit_spares(dev, 0);
  // The new chunks take spare memory first: what is left of it stays, within the budget.
  auto over = [&] { uint64_t t = swap::taken(dev) + std::max(bytes, swap::spare_device_bytes(dev)); return t > limit ? t - limit : 0; };
  if (over()) swap::release_retired(dev, over(), bytes);
  if (over() == 0) return Room::now;
  if (options().prefetch == Prefetch::off) return Room::never;  // the planner moves nothing then
  if (!evict) return Room::after_evictions;
  residency_make_room(dev, bytes);
  const bool made = over() == 0;
  // Device memory the evictions left (their copies are over in context order) is not kept past
  // the budget; the new chunks take it when they have none yet.
  swap::fit_spares(dev, created ? bytes : 0);
  return made ? Room::now : Room::never;
}

void say_refused(const AllocRequest& req, int dev, const char* reason) {
  Line l;
  l.str("refused ").bytes(req.bytes).str(" on device ").i64(dev).str(": ").str(reason).str(" (device budget ")
      .bytes(budget::limit(dev)).str(", in use ").bytes(ledger().used(dev)).str(")");
  log(LogLevel::info, l);
}

}  // namespace

void placement_init() {
  // JAX's default allocator takes three quarters of what cuMemGetInfo reports (the budget) as one
  // pool at start and never asks for more, so past it JAX fails with RESOURCE_EXHAUSTED where the
  // shim would place the memory; its cuda_async allocator asks the driver for each buffer, and
  // costs nothing where the program fits (docs/design/policies.md, "Frameworks' allocators").
  if (placement_config().policy != policy::PolicyKind::off && !env_value(Env::xla_allocator) &&
      !env_value(Env::xla_preallocate) && !env_value(Env::xla_mem_fraction)) {
    setenv("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async", 0);
  }
  if (!movable_policy()) return;
  // XLA's command buffers run a jitted step as one graph launch, which nothing can move memory
  // within (policy/frameworks.h); without them steps of small kernels take longer, so they go only
  // where a device limit says the program is expected to outgrow it.
  const std::string xla = placement_config().limit_enforced ? policy::xla_flags(env_value(Env::xla_flags)) : std::string();
  if (!xla.empty()) {
    setenv("XLA_FLAGS", xla.c_str(), 1);
    Line l;
    l.str("XLA_FLAGS=").str(xla.c_str()).str(", so that the shim sees each kernel of a jitted step and can move memory between them");
    log(LogLevel::info, l);
  }
  // PyTorch's allocator: what to ask and why in policy/frameworks.h (and
  // docs/analysis/swap-notes.md, "PyTorch's allocator").
  auto choose = [](const char* name, const char* user) {
    const std::string value = policy::torch_alloc_conf(user);
    if (value.empty()) return;
    setenv(name, value.c_str(), 1);
    Line l;
    l.str(name).chr('=').str(value.c_str());
    l.str(user && std::strstr(user, "expandable_segments") && !std::strstr(value.c_str(), "expandable_segments")
              ? " (expandable segments replaced: past the budget they are read over the link, never moved)"
              : ", so that PyTorch frees what it frees");
    log(LogLevel::info, l);
  };
  const char* cuda_conf = env_value(Env::pytorch_cuda_alloc_conf);
  const char* conf = env_value(Env::pytorch_alloc_conf);
  if (cuda_conf || !conf) choose("PYTORCH_CUDA_ALLOC_CONF", cuda_conf);
  if (conf) choose("PYTORCH_ALLOC_CONF", conf);
}

policy::DeviceBudget placement_budget(int dev) {
  policy::DeviceBudget within{budget::limit(dev), ledger().used(dev)};
  if (placement_config().policy == policy::PolicyKind::auto_) within.used += ledger().resident(dev);
  return within;
}

CUresult allocate(const AllocRequest& req, CUdeviceptr* out, CUresult (*device_alloc)(void*), void* ctx) {
  int dev = out ? driver::current_device() : -1;
  if (dev < 0 || !placement_active()) {
    // Pass-through, or a thread with no current context: PyTorch's autograd thread makes its first
    // stream-ordered allocation that way (the driver takes the context from the stream). Nothing
    // the shim could make (managed memory needs a context) and no budget to check it against, so
    // it is the program's own allocation, counted on the device it landed on.
    CUresult r = device_alloc(ctx);
    bool ok = r == CUDA_SUCCESS && out;
    observe::region_alloc(req.family, ok, ok ? static_cast<uintptr_t>(*out) : 0, req.bytes, MemKind::device,
                          req.origin, !ok ? -1 : dev >= 0 ? dev : driver::device_of(static_cast<uintptr_t>(*out)), 0);
    return r;
  }
  const auto& cfg = placement_config();
  policy::PlacementRequest pr;
  pr.bytes = req.bytes;
  pr.capturing = req.in_graph || (req.stream_ordered && driver::stream_capturing(req.stream, req.per_thread));
  const policy::DeviceBudget within = placement_budget(dev);
  pr.recurring = req.bytes > within.limit / 4 && made_again(req.bytes, dev);  // only large ones ask
  policy::Placement p = policy::place(cfg, within, ledger().created(), pr);

  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  if (p.where == Where::device) {
    r = device_alloc(ctx);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && swap::retired_device_bytes(dev) + swap::spare_device_bytes(dev) != 0) {
      swap::release_retired(dev, UINT64_MAX);  // movable memory kept for reuse is the first to go
      swap::trim_spares(dev, 0);
      r = device_alloc(ctx);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY && cfg.policy != policy::PolicyKind::off) {
      pr.device_refused = true;  // the card is fuller than the budget says: other processes
      p = policy::place(cfg, within, ledger().created(), pr);
    }
  }
  uintptr_t alias = 0;
  bool swap_on_device = false, swap_reused = false;
  std::vector<swap::Woken> woken;
  MemKind kind = MemKind::device;
  Placement placement = Placement::device;
  // Host memory for a graph being captured is made outside it: allowed to this thread even while a
  // capture in global mode forbids such calls (which would also invalidate the capture).
  std::optional<driver::RelaxedCapture> relaxed;
  if (pr.capturing && (p.where == Where::managed || p.where == Where::pinned)) relaxed.emplace();
  switch (p.where) {
    case Where::device:
      break;
    case Where::managed:
      r = alloc_managed(out, req.bytes, dev);
      kind = MemKind::managed;
      placement = Placement::managed;
      break;
    case Where::pinned:
      r = alloc_pinned(out, req.bytes, &alias);
      kind = MemKind::pinned_host;
      placement = Placement::pinned;
      break;
    case Where::swap: {
      swap::Use use{req.stream, req.stream_ordered, req.per_thread};
      swap_reused = swap::reuse(out, req.bytes, dev, use, &woken);
      if (swap_reused) {
        r = CUDA_SUCCESS;
      } else {
        // Asked first, then placed: room is made (evictions) outside the swap lock, which moves take.
        const uint64_t need = swap::backing_needed(req.bytes, dev);
        // In context order a round's copies are over when it returns, so the new chunks map the
        // memory the evictions leave as fast as new memory, without making it and giving the
        // evicted memory back (docs/analysis/swap-notes.md, "Context order").
        const bool evict_first = !scan_order();
        Room room = need == 0 ? Room::now : room_for_swap(dev, need, evict_first);
        // Address space for all the movable memory the budget and the managed cap allow, twice
        // over for room between allocations: one slab, normally.
        const uint64_t slab = 2 * (budget::limit(dev) + cfg.managed_limit);
        r = swap::create(out, req.bytes, dev, room != Room::never, use, slab, &woken);
        if (room == Room::after_evictions) {
          // Scan order: mapped before the evictions that make its room start copying to the host:
          // access calls are many times slower under such copies (docs/analysis/swap-notes.md,
          // "The copy gate"). The card holds the new chunks meanwhile, as it holds evicted memory
          // until its copy is over; when it is full, the evictions go first.
          if (r == CUDA_SUCCESS) {
            room_for_swap(dev, need, true, true);
          } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            room = room_for_swap(dev, need, true);
            r = swap::create(out, req.bytes, dev, room != Room::never, use, slab, &woken);
          }
        }
        swap_on_device = room != Room::never;
        if (r == CUDA_ERROR_OUT_OF_MEMORY && swap_on_device) {
          // The card is fuller than the budget says (other processes): the host then.
          swap_on_device = false;
          r = swap::create(out, req.bytes, dev, false, use, slab, &woken);
        }
      }
      placement = Placement::swap;
      break;
    }
    case Where::out_of_memory:
      r = CUDA_ERROR_OUT_OF_MEMORY;
      say_refused(req, dev, p.reason);
      if (trace::enabled()) trace::decision("refuse", 0, req.bytes, dev, p.reason);
      break;
  }
  bool ok = r == CUDA_SUCCESS;
  observe::region_alloc(req.family, ok, ok ? static_cast<uintptr_t>(*out) : 0, req.bytes, kind, req.origin, dev, 0,
                        placement, alias);
  Stats& s = runtime_stats();
  if (!ok) {
    if (p.where == Where::out_of_memory) s.decision(Decision::refused, req.bytes);
    return r;
  }
  bool spill = cfg.policy == policy::PolicyKind::spill || cfg.policy == policy::PolicyKind::auto_ || req.bytes < cfg.min_size;
  switch (p.where) {
    case Where::device:
      // Under spill or auto without a budget every allocation that the card takes stays: only a
      // budget, or a policy that converts, makes staying a decision worth counting.
      if (cfg.policy != policy::PolicyKind::off &&
          (cfg.limit_enforced || (cfg.policy != policy::PolicyKind::spill && cfg.policy != policy::PolicyKind::auto_))) {
        s.decision(Decision::kept_on_device, req.bytes);
      }
      break;
    case Where::managed:
      s.decision(spill ? Decision::spilled_managed : Decision::converted_managed, req.bytes);
      if (trace::enabled()) trace::decision(spill ? "spill_managed" : "convert_managed", *out, req.bytes, dev, p.reason);
      residency_track(static_cast<uintptr_t>(*out), req.bytes, dev,
                      cfg.policy == policy::PolicyKind::auto_ ? Tracked::streamed : Tracked::managed);
      break;
    case Where::pinned:
      s.decision(spill ? Decision::spilled_pinned : Decision::converted_pinned, req.bytes);
      if (trace::enabled()) trace::decision(spill ? "spill_pinned" : "convert_pinned", *out, req.bytes, dev, p.reason);
      break;
    case Where::swap:
      s.decision(Decision::converted_swap, req.bytes);
      if (trace::enabled()) {
        trace::decision("convert_swap", *out, req.bytes, dev,
                        swap_reused ? "reused" : swap_on_device ? "on the device" : "on the host: over budget");
      }
      // Each chunk is a region of its own; those that held nothing live are not tracked.
      for (const swap::Woken& w : woken) {
        residency_track(w.base, swap::chunk_bytes(), dev, Tracked::swap, w.on_device ? swap::chunk_bytes() : 0);
      }
      residency_swap_made(static_cast<uintptr_t>(*out), req.bytes, dev);
      break;
    case Where::out_of_memory:
      break;
  }
  // Its uses are counted from here: the rule for allocations made again (act/made_again.h).
  if (p.where != Where::device && req.bytes > within.limit / 4) large_made(static_cast<uintptr_t>(*out));
  if (trace::enabled()) trace::budget(dev);
  return r;
}

CUresult free(CUdeviceptr p, Family family, CUstream stream, bool stream_ordered, bool per_thread,
              CUresult (*real_free)(void*), void* ctx, bool in_graph) {
  // Out of the registry before the real free: see observe::region_release.
  auto region = observe::region_release(static_cast<uintptr_t>(p));
  if (region) tables::freed(region->base, region->size);  // a later allocation there holds no addresses
  // Any allocation the policy placed (spilled ones are managed memory too), not the program's own managed memory.
  if (region && (region->kind != MemKind::managed || region->placement == Placement::managed)) large_freed(*region);
  if (region && region->kind == MemKind::managed) {
    residency_forget(region->base);
    // The program's own managed memory, which its CPU may have touched (the shim's spills it never does).
    if (region->placement != Placement::managed) {
      census_freeing(region->base);  // what the CPU took back since the last synchronisation
      if (trace::enabled()) trace::flush_device_records();
    }
  }
  CUresult r = CUDA_SUCCESS;
  if (region && (region->placement == Placement::managed || region->placement == Placement::pinned ||
                 region->placement == Placement::swap)) {
    const bool swap = region->placement == Placement::swap;
    if (in_graph || (stream_ordered && driver::stream_capturing(stream, per_thread))) {
      // Captured, the free is a node of a graph that has not run yet, and may never run: the memory
      // must outlive every launch of the graph's kernels, and synchronising a capturing stream would
      // end the capture. So it is kept, and goes back to the system with the process.
      if (log_enabled(LogLevel::info)) {
        Line l;
        l.str("stream-ordered free of ").bytes(region->size).str(" of memory the shim placed, inside a stream capture: kept until exit");
        log(LogLevel::info, l);
      }
      observe::region_released(family, true, static_cast<uintptr_t>(p), region);
      // Still there: it counts against the managed limit until exit, or captures that repeat
      // would make host memory past any limit.
      if (!swap) ledger().add_created(region->size);
      return CUDA_SUCCESS;
    }
    if (swap) {
      // Kept for reuse (act/swap.h), at most a budget's worth.
      std::vector<uintptr_t> dead;
      r = swap::retire(region->base, swap::Use{stream, stream_ordered, per_thread}, budget::limit(region->device), &dead);
      if (r == CUDA_SUCCESS) residency_swap_freed(region->base, region->size, region->device);  // chunks still tracked
      for (uintptr_t chunk : dead) residency_forget(chunk, swap::holds_nothing);
    } else {
      if (stream_ordered) {
        // The program may still have work queued on the stream that uses this memory.
        r = driver::sync_stream(stream, per_thread);
      }
      if (r == CUDA_SUCCESS) {
        r = region->placement == Placement::pinned ? host_free(reinterpret_cast<void*>(region->host_alias))
                                                   : call_real(GMS_REAL(cuMemFree_v2), p);
      }
    }
  } else {
    r = real_free(ctx);
  }
  observe::region_released(family, r == CUDA_SUCCESS, static_cast<uintptr_t>(p), region);
  if (region && trace::enabled()) trace::budget(region->device);
  return r;
}

void adjust_mem_info(size_t* free_bytes, size_t* total_bytes) {
  if (!placement_active()) return;
  budget::clamp_mem_info(driver::current_device(), free_bytes, total_bytes);
}

void ipc_handle_refused(uintptr_t p, CUresult r) {
  ShimScope scope;
  auto region = cuda_regions().find(p);
  if (!region || (region->placement != Placement::swap && region->placement != Placement::managed &&
                  region->placement != Placement::pinned)) {
    return;
  }
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  Line l;
  l.str("cuIpcGetMemHandle at ").hex(p).str(" failed (CUresult ").i64(r).str("): the shim made that memory ")
      .str(placement_name(region->placement))
      .str(", which has no legacy IPC handle; to share device memory between processes so, run the program with "
           "GPUMEMSHIM_POLICY=spill and a budget it fits");
  log(LogLevel::warn, l);
}

}  // namespace gms::act
