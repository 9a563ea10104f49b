#pragma once
// Where a device allocation should live. Pure decisions over plain numbers: the shim's allocation
// hooks describe the request and the device's budget, this answers, and the hooks carry it out.
//
// Why spill to managed memory advised to stay on the host: on our H100 a kernel streams such memory
// over the link at 38 to 40 GB/s with no page faults, against 4 to 6 GB/s for fault-driven
// migration, and it takes no device memory; the residency planner then prefetches what fits.
#include <cstdint>

namespace gms::policy {

enum class PolicyKind : uint8_t { off, spill, managed, pinned, swap, auto_ };
enum class SpillTarget : uint8_t { managed, pinned };

enum class Where : uint8_t {
  device,         // an ordinary device allocation (what the program asked for)
  managed,        // managed memory, preferred location host, accessed by the device
  pinned,         // mapped pinned host memory (zero-copy)
  swap,           // movable device memory: a reserved range backed by device or host memory in
                  // chunks, moved between them by copies (act/swap.h)
  out_of_memory,  // fail with CUDA_ERROR_OUT_OF_MEMORY, as the driver would
};
const char* where_name(Where w);

struct PlacementConfig {
  PolicyKind policy = PolicyKind::off;
  SpillTarget spill = SpillTarget::managed;
  uint64_t min_size = 1ull << 20;  // policies managed/pinned/swap convert allocations at or above this
  uint64_t managed_limit = 0;      // cap on all managed, pinned and swap memory the shim creates; 0: none
  bool limit_enforced = false;     // the user set a device budget (policy off then enforces it)
};

struct DeviceBudget {
  uint64_t limit = 0;  // bytes of device memory the program may use on this device
  uint64_t used = 0;   // bytes counted against it now (device allocations, VMM, resident prefetches)
};

struct PlacementRequest {
  uint64_t bytes = 0;
  bool capturing = false;       // the stream (or the legacy stream) is being captured into a graph
  bool device_refused = false;  // the driver already said out-of-memory for a device allocation
  // An allocation of this size, used by many launches, was freed before: a buffer made again every
  // step (XLA allocates all of a jitted step's temporaries as one buffer per run), not an array
  // streamed once a pass.
  bool recurring = false;
};

struct Placement {
  Where where;
  const char* reason;  // one short phrase for logs and traces
};

// managed_in_use: the managed, pinned and movable bytes the shim has created so far.
//
// During a stream capture: ordinary device memory within the budget; under auto, past the budget
// too, unless the driver refused; beyond that, under spill and auto, host memory made outside the
// graph (spill's target, managed under auto) within the managed limit; else out of memory.
// auto: movable memory (Where::swap), which the planner moves between the device and the host, for
// everything but an allocation of more than a quarter of the budget, which is placed as spill
// places it: ordinary device memory where it fits beside what is there, else managed memory read
// over the link where it lies. Moving such a region would evict a quarter of the budget or more
// for one region, and a region that large is mostly streamed (scenarios S1, S3: arrays of half the
// budget, read once a pass), where reading it over the link costs its bytes once and moving it
// costs them twice, plus what it evicts; and movable memory costs mappings that ordinary memory
// does not. But one past the budget made again at the size of one freed before that launches used
// many times is a step's working memory, read and written many times a step: read over the link, a
// JAX step of an MLP with 2 GiB of parameters took 3.7 s against 45 ms with no limit (one H200,
// 2026-11-27, its 1.4 GB temporaries spilled each step), so it is movable like the rest. Only the
// part of the movable memory beyond the budget needs host memory, so only that counts against the
// managed limit: a program that fits the card never meets the cap.
Placement place(const PlacementConfig& cfg, const DeviceBudget& budget, uint64_t managed_in_use,
                const PlacementRequest& req);

// A cuMemCreate of device memory (virtual memory management: PyTorch's expandable segments, JAX,
// NCCL). The program maps the handle itself, so the memory can only be what it asked for or host
// memory that its mappings reach over the link (Where::pinned here: a host-located handle).
struct VmmRequest {
  uint64_t bytes = 0;
  bool device_refused = false;  // the driver already said out-of-memory for device memory
};
// Within the budget: device memory. Past it (or refused by the driver): host memory under every
// policy but off, within the managed limit (under auto, beyond the budget's worth of movable memory,
// as for place()); out of memory under off with a device limit.
Placement place_vmm(const PlacementConfig& cfg, const DeviceBudget& budget, uint64_t managed_in_use,
                    const VmmRequest& req);

}  // namespace gms::policy
