#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/registry.h"
#include "core/runtime.h"
#include "core/stats.h"

// The narrow API that the hooks in shim/entry/ (and act/) call after the real call has returned:
// it records what happened in the registry, the statistics and the trace. A layer of its own above
// core and trace (docs/design/layers.md). It knows nothing of CUDA types, so unit tests drive it
// directly, without preloading anything.
namespace gms::observe {

// Regions made by the driver: device, managed, pinned host, VMM.
// `placement` says what the shim made of a device allocation; device memory and VMM count against
// the device's budget, managed/pinned memory the shim created against GPUMEMSHIM_MANAGED_LIMIT.
void region_alloc(Family f, bool ok, uintptr_t base, size_t size, MemKind kind, Origin origin, int device,
                  uint32_t flags, Placement placement = Placement::passthrough, uintptr_t host_alias = 0);
void region_free(Family f, bool ok, uintptr_t base);
// A free in two steps around the real call: the region leaves the registry before it (once the
// driver has the memory back, another thread may be handed the same address and must not find, or
// later lose, this region), and comes back if the free failed. region_free is both at once.
std::optional<Region> region_release(uintptr_t base);
void region_released(Family f, bool ok, uintptr_t base, const std::optional<Region>& released);
// The live region that starts exactly at base, if any.
std::optional<Region> region_at(uintptr_t base);
void vmm_unmap(bool ok, uintptr_t base, size_t size);
void host_register(bool ok, uintptr_t base, size_t size, uint32_t flags);
void host_unregister(bool ok, uintptr_t base);
// A call with nothing to record but its count and bytes (memset, prefetch, advise, cuMemGetInfo...).
void call(Family f, bool ok, uint64_t bytes);
inline void launch(LaunchKind k, bool ok) { runtime_stats().launch(k, ok); }

// One end of a copy. `unified` is a pointer whose kind the call does not say (cuMemcpy,
// CU_MEMORYTYPE_UNIFIED): the registry is asked first, then `ask_driver` if it is still unknown.
enum class Side : uint8_t { host, device, array, unified };
struct CopyEnd {
  Side side;
  uintptr_t addr;
};
// What a pointer turned out to be.
enum class PtrKind : uint8_t { pageable, pinned, managed, device };
using AskDriver = PtrKind (*)(uintptr_t addr);

PtrKind classify(CopyEnd end, AskDriver ask_driver);
// Records one copy (bytes in one direction); `peer` for the cuMemcpyPeer family.
void copy_one(CopyEnd dst, CopyEnd src, uint64_t bytes, bool peer, AskDriver ask_driver);
// The same, with both ends already classified (the hook needed to know them anyway).
void copy_classified(PtrKind dst, PtrKind src, uint64_t bytes, bool peer);
// The call as a whole: its count, its total bytes, and whether it failed.
void copy_call(bool ok, uint64_t bytes);

// Host blocks: large malloc-family and mmap blocks.
// `prot`: for mmap blocks, the protection (read-only file mappings register read-only).
// `serial`: 0 for a new block instance; a recycled pool block keeps the one it was given by
// new_host_serial(), so that its registration is found again.
void host_block_alloc(uintptr_t base, size_t size, Origin origin, uint32_t prot = 0, uint64_t serial = 0);
uint64_t new_host_serial();
// Forgets the block starting at base; returns it (nothing if it was not tracked).
std::optional<Region> host_block_free(uintptr_t base);
// A range of address space went away (munmap, mremap's old range, MAP_FIXED over it).
void host_range_gone(uintptr_t lo, uintptr_t hi);

}  // namespace gms::observe
