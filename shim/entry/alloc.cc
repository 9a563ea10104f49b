// Allocation, free, host pinning and VMM entry points.
#include <cstring>

#include "act/arrays.h"
#include "act/census.h"
#include "act/copy.h"
#include "act/graph_nodes.h"
#include "act/heap.h"
#include "act/host_alloc.h"
#include "act/placement.h"
#include "act/residency.h"
#include "act/vmm.h"
#include "common.h"

namespace gms::entry {

namespace {
void device_alloc(CUresult r, CUdeviceptr* dptr, size_t bytes, Origin origin) {
  observe::region_alloc(Family::mem_alloc, ok(r), ok(r) && dptr ? addr(*dptr) : 0, bytes, MemKind::device, origin,
                        ok(r) ? current_device() : -1, 0, Placement::device);
}

// The placement policy decides; `alloc` is the program's own call, made when the answer is device.
template <typename F>
CUresult placed(Origin origin, size_t bytes, CUdeviceptr* dptr, CUstream stream, bool stream_ordered, bool per_thread,
                F&& alloc) {
  act::AllocRequest req{origin, Family::mem_alloc, bytes, stream, stream_ordered, per_thread};
  return act::allocate(req, dptr, act::invoke<F>, &alloc);
}

template <typename F>
CUresult freed(CUdeviceptr p, CUstream stream, bool stream_ordered, bool per_thread, F&& real_free) {
  return act::free(p, Family::mem_free, stream, stream_ordered, per_thread, act::invoke<F>, &real_free);
}

constexpr bool is_ptsz(const char* name) {
  const char* e = name;
  while (*e) ++e;
  return e - name > 5 && e[-5] == '_' && e[-4] == 'p' && e[-3] == 't' && e[-2] == 's' && e[-1] == 'z';
}
}  // namespace

}  // namespace gms::entry

using namespace gms;
using namespace gms::entry;

GMS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  GMS_NESTED(cuMemAlloc_v2, dptr, bytes);
  return placed(Origin::cuMemAlloc, bytes, dptr, nullptr, false, false,
                [&] { return call_real(GMS_REAL(cuMemAlloc_v2), dptr, bytes); });
}

GMS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                       unsigned int elem) {
  GMS_NESTED(cuMemAllocPitch_v2, dptr, pitch, width, height, elem);
  // Pitched allocations stay on the device: the driver chooses the pitch. They count against the
  // budget like any other device memory.
  CUresult r = call_real(GMS_REAL(cuMemAllocPitch_v2), dptr, pitch, width, height, elem);
  device_alloc(r, dptr, ok(r) && pitch ? *pitch * height : 0, Origin::cuMemAllocPitch);
  return r;
}

GMS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  GMS_NESTED(cuMemAllocManaged, dptr, bytes, flags);
  if (trace::enabled()) trace::begin();
  CUresult r = call_real(GMS_REAL(cuMemAllocManaged), dptr, bytes, flags);
  int dev = ok(r) ? current_device() : -1;
  observe::region_alloc(Family::mem_alloc_managed, ok(r), ok(r) && dptr ? addr(*dptr) : 0, bytes, MemKind::managed,
                        Origin::cuMemAllocManaged, dev, flags);
  // The program's own managed memory gets the same prefetch before kernels as spilled memory.
  if (ok(r) && dptr) act::residency_track(addr(*dptr), bytes, dev, act::Tracked::own);
  if (ok(r) && dptr && trace::enabled()) act::census_made(addr(*dptr), bytes, dev);
  return r;
}

#define GMS_ALLOC_ASYNC(sym)                                                   \
  GMS_EXPORT CUresult sym(CUdeviceptr* dptr, size_t bytes, CUstream stream) { \
    GMS_NESTED(sym, dptr, bytes, stream);                                      \
    return placed(Origin::cuMemAllocAsync, bytes, dptr, stream, true, is_ptsz(#sym), \
                  [&] { return call_real(GMS_REAL(sym), dptr, bytes, stream); });   \
  }
GMS_ALLOC_ASYNC(cuMemAllocAsync)
GMS_ALLOC_ASYNC(cuMemAllocAsync_ptsz)

#define GMS_ALLOC_POOL(sym)                                                                          \
  GMS_EXPORT CUresult sym(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {     \
    GMS_NESTED(sym, dptr, bytes, pool, stream);                                                      \
    return placed(Origin::cuMemAllocFromPoolAsync, bytes, dptr, stream, true, is_ptsz(#sym),         \
                  [&] { return call_real(GMS_REAL(sym), dptr, bytes, pool, stream); });             \
  }
GMS_ALLOC_POOL(cuMemAllocFromPoolAsync)
GMS_ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz)

GMS_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  GMS_NESTED(cuMemFree_v2, p);
  return freed(p, nullptr, false, false, [&] { return call_real(GMS_REAL(cuMemFree_v2), p); });
}

// Stream-ordered free: the region is gone for the program from this call on, whatever the stream
// still has queued, so it leaves the registry now.
#define GMS_FREE_ASYNC(sym)                                                                        \
  GMS_EXPORT CUresult sym(CUdeviceptr p, CUstream stream) {                                        \
    GMS_NESTED(sym, p, stream);                                                                    \
    return freed(p, stream, true, is_ptsz(#sym), [&] { return call_real(GMS_REAL(sym), p, stream); }); \
  }
GMS_FREE_ASYNC(cuMemFreeAsync)
GMS_FREE_ASYNC(cuMemFreeAsync_ptsz)

// Memory nodes added to a graph by hand (act/graph_nodes.h). `empty` stands in for a node of
// memory the shim made outside the graph.
GMS_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n,
                                           CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  GMS_NESTED(cuGraphAddMemAllocNode, node, graph, deps, n, params);
  auto real = [&] { return call_real(GMS_REAL(cuGraphAddMemAllocNode), node, graph, deps, n, params); };
  auto empty = [&] { return call_real(GMS_REAL(cuGraphAddEmptyNode), node, graph, deps, n); };
  return act::graph_alloc_node(node, params, params ? &params->dptr : nullptr, act::invoke<decltype(real)>, &real,
                               act::invoke<decltype(empty)>, &empty);
}

GMS_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n,
                                          CUdeviceptr p) {
  GMS_NESTED(cuGraphAddMemFreeNode, node, graph, deps, n, p);
  auto real = [&] { return call_real(GMS_REAL(cuGraphAddMemFreeNode), node, graph, deps, n, p); };
  auto empty = [&] { return call_real(GMS_REAL(cuGraphAddEmptyNode), node, graph, deps, n); };
  return act::graph_free_node(p, act::invoke<decltype(real)>, &real, act::invoke<decltype(empty)>, &empty);
}

GMS_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  GMS_NESTED(cuGraphMemAllocNodeGetParams, node, out);
  CUresult r = call_real(GMS_REAL(cuGraphMemAllocNodeGetParams), node, out);
  return r != CUDA_SUCCESS && act::graph_node_params(node, out) ? CUDA_SUCCESS : r;
}

namespace {
// cuGraphAddNode and its _v2 with a memory node's parameters, as the calls above; `real` adds the
// node the program asked for, `empty` an empty one in its place.
template <typename Real, typename Empty>
CUresult graph_add_node(CUgraphNode* node, CUgraphNodeParams* p, Real&& real, Empty&& empty) {
  if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == sizeof(p->alloc), "the _v2 parameters keep the layout");
    CUDA_MEM_ALLOC_NODE_PARAMS asked;
    std::memcpy(&asked, &p->alloc, sizeof asked);
    return act::graph_alloc_node(node, &asked, &p->alloc.dptr, act::invoke<Real>, &real, act::invoke<Empty>, &empty);
  }
  if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
    return act::graph_free_node(p->free.dptr, act::invoke<Real>, &real, act::invoke<Empty>, &empty);
  }
  return real();
}
}  // namespace

GMS_EXPORT CUresult cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n,
                                   CUgraphNodeParams* p) {
  GMS_NESTED(cuGraphAddNode, node, graph, deps, n, p);
  return graph_add_node(
      node, p, [&] { return call_real(GMS_REAL(cuGraphAddNode), node, graph, deps, n, p); },
      [&] { return call_real(GMS_REAL(cuGraphAddEmptyNode), node, graph, deps, n); });
}

GMS_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                      const CUgraphEdgeData* edges, size_t n, CUgraphNodeParams* p) {
  GMS_NESTED(cuGraphAddNode_v2, node, graph, deps, edges, n, p);
  return graph_add_node(
      node, p, [&] { return call_real(GMS_REAL(cuGraphAddNode_v2), node, graph, deps, edges, n, p); },
      [&] {
        // The edges' data (ports, types) stay with an empty node of the same call.
        if (!edges) return call_real(GMS_REAL(cuGraphAddEmptyNode), node, graph, deps, n);
        CUgraphNodeParams e{};
        e.type = CU_GRAPH_NODE_TYPE_EMPTY;
        return call_real(GMS_REAL(cuGraphAddNode_v2), node, graph, deps, edges, n, &e);
      });
}

// The device-side malloc heap's size counts against the budget (act/heap.h); other limits pass.
GMS_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  GMS_NESTED(cuCtxSetLimit, limit, value);
  auto set = [&] { return call_real(GMS_REAL(cuCtxSetLimit), limit, value); };
  if (limit != CU_LIMIT_MALLOC_HEAP_SIZE) return set();
  return act::set_heap_size(value, act::invoke<decltype(set)>, &set);
}

GMS_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
  GMS_NESTED(cuMemHostAlloc, pp, bytes, flags);
  CUresult r = act::host_alloc(pp, bytes, flags);
  observe::region_alloc(Family::host_alloc, ok(r), ok(r) && pp ? addr(*pp) : 0, bytes, MemKind::pinned_host,
                        Origin::cuMemHostAlloc, -1, flags);
  return r;
}

GMS_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytes) {
  GMS_NESTED(cuMemAllocHost_v2, pp, bytes);
  CUresult r = CUDA_SUCCESS;
  if (!act::fast_host_alloc(pp, bytes, 0, &r)) r = call_real(GMS_REAL(cuMemAllocHost_v2), pp, bytes);
  observe::region_alloc(Family::host_alloc, ok(r), ok(r) && pp ? addr(*pp) : 0, bytes, MemKind::pinned_host,
                        Origin::cuMemAllocHost, -1, 0);
  return r;
}

GMS_EXPORT CUresult cuMemFreeHost(void* p) {
  GMS_NESTED(cuMemFreeHost, p);
  auto released = observe::region_release(addr(p));  // before the driver can reuse the address
  CUresult r = act::host_free(p);
  observe::region_released(Family::host_free, ok(r), addr(p), released);
  return r;
}

#define GMS_HOST_REGISTER(sym)                                                \
  GMS_EXPORT CUresult sym(void* p, size_t bytes, unsigned int flags) {        \
    GMS_NESTED(sym, p, bytes, flags);                                         \
    act::before_program_registers(addr(p), addr(p) + bytes);                  \
    CUresult r = call_real(GMS_REAL(sym), p, bytes, flags);                   \
    observe::host_register(ok(r), addr(p), bytes, flags);                     \
    return r;                                                                 \
  }
GMS_HOST_REGISTER(cuMemHostRegister)
GMS_HOST_REGISTER(cuMemHostRegister_v2)

GMS_EXPORT CUresult cuMemHostUnregister(void* p) {
  GMS_NESTED(cuMemHostUnregister, p);
  // Pinned memory the shim made for cuMemHostAlloc is allocated memory to the program, which the
  // driver refuses to unregister.
  CUresult r = act::fast_host_block(p) ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
                                       : call_real(GMS_REAL(cuMemHostUnregister), p);
  observe::host_unregister(ok(r), addr(p));
  return r;
}

GMS_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  GMS_NESTED(cuMemGetInfo_v2, free_bytes, total_bytes);
  CUresult r = call_real(GMS_REAL(cuMemGetInfo_v2), free_bytes, total_bytes);
  observe::call(Family::mem_get_info, ok(r), 0);
  if (ok(r)) act::adjust_mem_info(free_bytes, total_bytes);  // frameworks size themselves from it
  return r;
}

// Pointer queries: at a parked chunk of movable memory (GPUMEMSHIM_SWAP_PARK) the driver knows
// nothing, so the chunk is mapped first and the driver answers as for any movable memory.
GMS_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  GMS_NESTED(cuPointerGetAttribute, data, attr, p);
  act::before_pointer_query(static_cast<uintptr_t>(p));
  return call_real(GMS_REAL(cuPointerGetAttribute), data, attr, p);
}

GMS_EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data, CUdeviceptr p) {
  GMS_NESTED(cuPointerGetAttributes, n, attrs, data, p);
  act::before_pointer_query(static_cast<uintptr_t>(p));
  return call_real(GMS_REAL(cuPointerGetAttributes), n, attrs, data, p);
}

GMS_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  GMS_NESTED(cuMemGetAddressRange_v2, base, size, p);
  act::before_pointer_query(static_cast<uintptr_t>(p));
  return call_real(GMS_REAL(cuMemGetAddressRange_v2), base, size, p);
}

GMS_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr p) {
  GMS_NESTED(cuIpcGetMemHandle, handle, p);
  CUresult r = call_real(GMS_REAL(cuIpcGetMemHandle), handle, p);
  if (r != CUDA_SUCCESS) act::ipc_handle_refused(static_cast<uintptr_t>(p), r);
  return r;
}

GMS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
  GMS_NESTED(cuMemCreate, handle, size, prop, flags);
  CUresult r = act::vmm_create(handle, size, prop, flags, [](CUmemGenericAllocationHandle* h, size_t n,
                                                           const CUmemAllocationProp* p, unsigned long long f) {
    return call_real(GMS_REAL(cuMemCreate), h, n, p, f);
  });
  observe::call(Family::vmm, ok(r), size);
  return r;
}

namespace {
// An array of `shape`, made by `make` (the driver's call) when the budget allows it.
template <typename H, typename F>
CUresult array_create(H* handle, const policy::ArrayShape& shape, F&& make) {
  const uint64_t bytes = policy::array_bytes(shape);
  int dev = -1;
  if (handle && !act::array_may_create(bytes, &dev)) {
    observe::call(Family::mem_alloc, false, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r = make();
  if (r == CUDA_ERROR_OUT_OF_MEMORY && act::array_room_after_refusal(dev)) r = make();
  if (ok(r) && handle) act::array_created(reinterpret_cast<uint64_t>(*handle), bytes, dev);
  observe::call(Family::mem_alloc, ok(r), bytes);
  return r;
}

// The destroy of array `handle` by `destroy` (the driver's call): off the books first, back on if
// the driver refuses.
template <typename H, typename F>
CUresult array_destroy(H handle, F&& destroy) {
  const uint64_t key = reinterpret_cast<uint64_t>(handle);
  const act::ArrayBooked booked = act::array_destroying(key);
  CUresult r = destroy();
  if (!ok(r) && booked.bytes) act::array_created(key, booked.bytes, booked.dev);
  observe::call(Family::mem_free, ok(r), 0);
  return r;
}

policy::ArrayShape shape_of(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels = 1) {
  return {d.Width, d.Height, d.Depth, static_cast<uint32_t>(d.Format), d.NumChannels, d.Flags, levels};
}
}  // namespace

GMS_EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  GMS_NESTED(cuArrayCreate_v2, handle, desc);
  if (!desc) return call_real(GMS_REAL(cuArrayCreate_v2), handle, desc);
  const policy::ArrayShape shape{desc->Width, desc->Height, 0, static_cast<uint32_t>(desc->Format), desc->NumChannels, 0, 1};
  return array_create(handle, shape, [&] { return call_real(GMS_REAL(cuArrayCreate_v2), handle, desc); });
}

GMS_EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  GMS_NESTED(cuArray3DCreate_v2, handle, desc);
  if (!desc) return call_real(GMS_REAL(cuArray3DCreate_v2), handle, desc);
  return array_create(handle, shape_of(*desc), [&] { return call_real(GMS_REAL(cuArray3DCreate_v2), handle, desc); });
}

GMS_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int levels) {
  GMS_NESTED(cuMipmappedArrayCreate, handle, desc, levels);
  if (!desc) return call_real(GMS_REAL(cuMipmappedArrayCreate), handle, desc, levels);
  return array_create(handle, shape_of(*desc, levels), [&] { return call_real(GMS_REAL(cuMipmappedArrayCreate), handle, desc, levels); });
}

GMS_EXPORT CUresult cuArrayDestroy(CUarray handle) {
  GMS_NESTED(cuArrayDestroy, handle);
  return array_destroy(handle, [&] { return call_real(GMS_REAL(cuArrayDestroy), handle); });
}

GMS_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray handle) {
  GMS_NESTED(cuMipmappedArrayDestroy, handle);
  return array_destroy(handle, [&] { return call_real(GMS_REAL(cuMipmappedArrayDestroy), handle); });
}

GMS_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  GMS_NESTED(cuMemRetainAllocationHandle, handle, addr);
  CUresult r = call_real(GMS_REAL(cuMemRetainAllocationHandle), handle, addr);
  if (ok(r) && handle) act::vmm_retained(*handle);
  return r;
}

GMS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags) {
  GMS_NESTED(cuMemMap, ptr, size, offset, handle, flags);
  CUresult r = call_real(GMS_REAL(cuMemMap), ptr, size, offset, handle, flags);
  observe::region_alloc(Family::vmm, ok(r), addr(ptr), size, MemKind::vmm, Origin::cuMemMap,
                        ok(r) ? current_device() : -1, 0);
  return r;
}

GMS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  GMS_NESTED(cuMemUnmap, ptr, size);
  CUresult r = call_real(GMS_REAL(cuMemUnmap), ptr, size);
  observe::vmm_unmap(ok(r), addr(ptr), size);
  return r;
}

GMS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  GMS_NESTED(cuMemRelease, handle);
  CUresult r = call_real(GMS_REAL(cuMemRelease), handle);
  if (ok(r)) act::vmm_released(handle);
  observe::call(Family::vmm, ok(r), 0);
  return r;
}
