// Which allocator to ask of a framework at load (docs/design/policies.md, "Frameworks' allocators"):
// pure string decisions over the program's environment, applied by act/placement.cc.
#pragma once

#include <string>
#include <string_view>

namespace gms::policy {

// PyTorch's allocator settings (PYTORCH_CUDA_ALLOC_CONF, comma-separated key:value) under a policy
// that makes movable memory (auto, swap). `user`: what the program set (null: nothing). Returns the
// value to set, or an empty string to leave the variable as it is.
// - nothing set: backend:cudaMallocAsync, whose frees reach the shim (PyTorch's caching allocator
//   keeps freed blocks, which the shim would keep moving in and out of the budget);
// - expandable_segments:True, without a backend: the same option list with that entry replaced by
//   backend:cudaMallocAsync. Expandable segments map cuMemCreate handles, which the shim counts and,
//   past the budget, makes in host memory that kernels read over the link; they never move, and a
//   training step ran several times slower with them (docs/design/policies.md, "Frameworks'
//   allocators"). What they are for (room past fragmentation, no out-of-memory) is what the
//   movable memory already gives.
// - other options only (an empty value too, which a script's `export PYTORCH_CUDA_ALLOC_CONF=`
//   leaves): backend:cudaMallocAsync added. With the native allocator, an empty value made a
//   training step past the budget 2.7x slower (docs/benchmarks.md, "Expandable segments").
// - a backend chosen, or a malformed expandable_segments entry: left alone.
std::string torch_alloc_conf(const char* user);

// XLA's flags (XLA_FLAGS, space-separated --name=value) under a policy that makes movable memory
// and a device limit. `user`: what the program set (null: nothing). Returns the value to set, or
// an empty string to leave the variable as it is.
// - XLA's command buffers off (--xla_gpu_enable_command_buffer= added): XLA runs a jitted step's
//   kernels as one CUDA graph launch, whose pointers no scan sees, so nothing can move within the
//   step: past the budget the memory left on the host was read over the link by every kernel, an
//   optax step several times slower than without them (docs/design/policies.md, "Frameworks'
//   allocators"). Steps of many small kernels run slower without them, so the shim asks it only
//   under a device limit.
// - left alone when the program chooses command buffers itself (that flag, or the older
//   --xla_gpu_graph_level), when the value names a file of flags (it does not start with '-'),
//   and where XLA would not read an added flag (after a word that is not a flag, or an open quote).
std::string xla_flags(const char* user);

}  // namespace gms::policy
