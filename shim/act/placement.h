#pragma once
// Carries out placement decisions with the real driver: the allocation hooks hand over the
// program's request and the ordinary allocation they would make; this decides (policy/placement)
// and makes device, managed or mapped pinned memory, records it, and frees each with its own call.
#include <optional>
#include <type_traits>

#include "act/config.h"
#include "observe/observe.h"
#include "driver/cuda_driver.h"
#include "policy/placement.h"

namespace gms::act {

// At load, before the program runs: under policy swap, PyTorch is asked for its cudaMallocAsync
// allocator backend unless the program's environment already configures PyTorch's allocator.
void placement_init();

struct AllocRequest {
  Origin origin;
  Family family;
  size_t bytes;
  CUstream stream;   // stream-ordered allocations: their stream; else nullptr
  bool stream_ordered;
  bool per_thread;   // the _ptsz entry point: stream 0 means the per-thread default stream
  bool in_graph = false;  // a memory node added to a graph by hand: placed as in a stream capture
};

// The device's budget as placement sees it: the limit, and what the program holds there, with,
// under auto, the movable memory on the device (a large allocation is spilled only when it does
// not fit beside it; policy/placement.h). Prefetched managed memory does not count: the planner
// evicts it when the budget shrinks.
policy::DeviceBudget placement_budget(int dev);

// Decides and allocates. `device_alloc` makes the ordinary allocation the program asked for.
CUresult allocate(const AllocRequest& req, CUdeviceptr* out, CUresult (*device_alloc)(void* ctx), void* ctx);

// Frees a pointer with the call that matches what the shim made of it. For stream-ordered frees
// of managed or pinned memory the shim made, the stream is synchronised first, so the free keeps
// stream order; movable memory is kept for reuse behind an event (act/swap.h).
// `real_free` is the program's own call, used for ordinary device memory. `in_graph`: a free node
// added to a graph by hand, handled as a stream-ordered free inside a capture.
CUresult free(CUdeviceptr p, Family family, CUstream stream, bool stream_ordered, bool per_thread,
              CUresult (*real_free)(void* ctx), void* ctx, bool in_graph = false);

// cuMemGetInfo within the budget (driver/budget.h) when allocations are decided at all.
void adjust_mem_info(size_t* free_bytes, size_t* total_bytes);

// The driver refused a legacy IPC handle (cuIpcGetMemHandle) at `p`: when the shim placed that
// memory (movable, managed or pinned, none of which has such a handle), one warning a process
// says so and what to run instead. The program gets the driver's error unchanged.
void ipc_handle_refused(uintptr_t p, CUresult r);

// Small wrapper to pass a lambda as (function, context).
template <typename F>
CUresult invoke(void* ctx) {
  return (*static_cast<std::remove_reference_t<F>*>(ctx))();
}

}  // namespace gms::act
