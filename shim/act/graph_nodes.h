#pragma once
// Memory nodes a program adds to a graph by hand (cuGraphAddMemAllocNode, cuGraphAddNode with a
// memory node's parameters; CUDA's own sample graphMemoryNodes builds its graph so). They are
// placed as memory allocated inside a stream capture (policy/placement.h): device memory within
// the budget, counted from the node's making; past it, under auto, device memory as far as the card
// allows; under spill (and auto once the card refuses) host memory made outside the graph, which
// every launch of the graph then uses. That memory gets an empty node in the allocation node's
// place, so the graph's edges stay as the program drew them, and a free node of it an empty node
// too: like a captured free of it, the memory is kept to exit, since the graph may run again.
#include "driver/cuda_driver.h"

namespace gms::act {

using NodeCall = CUresult (*)(void* ctx);

// `params`: what the program asked for (CUDA_MEM_ALLOC_NODE_PARAMS and its _v2 share one layout);
// `dptr`: where the program reads the address back. `add_real` adds the program's own node,
// `add_empty` an empty node with the same dependencies.
CUresult graph_alloc_node(CUgraphNode* node, const CUDA_MEM_ALLOC_NODE_PARAMS* params, CUdeviceptr* dptr,
                          NodeCall add_real, void* real_ctx, NodeCall add_empty, void* empty_ctx);

// A free node of `p`: the program's own (`add_real`) for device memory, an empty node for memory
// the shim made outside the graph.
CUresult graph_free_node(CUdeviceptr p, NodeCall add_real, void* real_ctx, NodeCall add_empty, void* empty_ctx);

// cuGraphMemAllocNodeGetParams of a node the shim made empty in an allocation's place: the
// program's parameters with the address it got. False for any other node.
bool graph_node_params(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out);

}  // namespace gms::act
