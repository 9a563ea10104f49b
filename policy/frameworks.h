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

}  // namespace gms::policy
