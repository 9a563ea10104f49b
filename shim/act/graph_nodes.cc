#include "act/graph_nodes.h"

#include <mutex>
#include <unordered_map>

#include "act/placement.h"
#include "core/guard.h"
#include "driver/calls.h"

namespace gms::act {
namespace {

// Nodes made empty in an allocation's place, with the parameters the program gave (bounded: a
// program that builds graphs without end drops the oldest answers, not memory).
struct Replaced {
  std::mutex mu;
  std::unordered_map<CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS> params;
};
Replaced& replaced() {
  static NoDestructor<Replaced> r;
  return *r;
}

}  // namespace

CUresult graph_alloc_node(CUgraphNode* node, const CUDA_MEM_ALLOC_NODE_PARAMS* params, CUdeviceptr* dptr,
                          NodeCall add_real, void* real_ctx, NodeCall add_empty, void* empty_ctx) {
  const bool on_this_device = node && params && dptr && params->bytesize != 0 &&
                              params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                              params->poolProps.location.id == driver::current_device();
  if (!on_this_device) {
    // Bad arguments get the driver's own error; memory on another device, or host-located, is the
    // program's own allocation, counted where it lands.
    CUresult r = add_real(real_ctx);
    if (r == CUDA_SUCCESS && params && dptr && params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
      observe::region_alloc(Family::mem_alloc, true, static_cast<uintptr_t>(*dptr), params->bytesize, MemKind::device,
                            Origin::cuGraphAddMemAllocNode, params->poolProps.location.id, 0, Placement::device);
    }
    return r;
  }
  bool real = false;
  auto alloc = [&] {
    real = true;
    return add_real(real_ctx);
  };
  AllocRequest req{Origin::cuGraphAddMemAllocNode, Family::mem_alloc, params->bytesize, nullptr, true, false, true};
  CUresult r = allocate(req, dptr, invoke<decltype(alloc)>, &alloc);
  if (r != CUDA_SUCCESS || real) return r;
  r = add_empty(empty_ctx);
  if (r != CUDA_SUCCESS) {
    auto none = [] { return CUDA_SUCCESS; };
    free(*dptr, Family::mem_free, nullptr, false, false, invoke<decltype(none)>, &none);
    return r;
  }
  CUDA_MEM_ALLOC_NODE_PARAMS kept = *params;
  kept.dptr = *dptr;
  Replaced& rep = replaced();
  std::lock_guard lock(rep.mu);
  if (rep.params.size() >= (1u << 16)) rep.params.clear();
  rep.params[*node] = kept;
  return CUDA_SUCCESS;
}

CUresult graph_free_node(CUdeviceptr p, NodeCall add_real, void* real_ctx, NodeCall add_empty, void* empty_ctx) {
  bool real = false;
  auto free_node = [&] {
    real = true;
    return add_real(real_ctx);
  };
  CUresult r = free(p, Family::mem_free, nullptr, true, false, invoke<decltype(free_node)>, &free_node, true);
  if (r != CUDA_SUCCESS || real) return r;
  return add_empty(empty_ctx);
}

bool graph_node_params(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  Replaced& rep = replaced();
  std::lock_guard lock(rep.mu);
  auto it = rep.params.find(node);
  if (it == rep.params.end() || !out) return false;
  *out = it->second;
  return true;
}

}  // namespace gms::act
