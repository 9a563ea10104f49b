// The stand-in driver's memory: the blocks it knows (device, managed, pinned and registered memory,
// and the mappings of fake_vmm.cc), allocation, pointer queries, unified-memory hints.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "fake_internal.h"

using namespace fake_internal;

// ---- state ----------------------------------------------------------------------------------------

namespace {

constexpr size_t kPitchAlign = 512;
std::atomic<size_t> g_device_used{0};

}  // namespace

namespace fake_internal {

std::mutex g_mu;
// Leaked on purpose: they must outlive every static destructor that might still call the driver.
std::map<uintptr_t, Block>& blocks() {
  static auto* m = new std::map<uintptr_t, Block>;
  return *m;
}

// Raw system calls: nothing an LD_PRELOAD hook or a sanitizer interceptor sees.
void* raw_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  return r == -1 ? nullptr : reinterpret_cast<void*>(r);
}
void raw_munmap(void* addr, size_t len) { syscall(SYS_munmap, addr, len); }

// The block containing [p, p+n), if any.
bool find_block(uintptr_t p, size_t n, Block* out) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = blocks();
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  const Block& b = it->second;
  if (p < b.base || p + (n ? n : 1) > b.base + b.size) return false;
  if (out) *out = b;
  return true;
}

}  // namespace fake_internal

namespace {

size_t page_round(size_t n) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) & ~(page - 1);
}

CUresult new_block(size_t size, Kind kind, uintptr_t* out) {
  size_t len = page_round(size ? size : 1);
  void* p = raw_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  auto base = reinterpret_cast<uintptr_t>(p);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    blocks()[base] = Block{base, size, len, kind};
  }
  if (kind == Kind::device || kind == Kind::managed) g_device_used.fetch_add(size);
  *out = base;
  return CUDA_SUCCESS;
}

// Frees the block that starts exactly at base if its kind is one of `a` or `b`.
bool drop_block(uintptr_t base, Kind a, Kind b) {
  Block blk;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = blocks().find(base);
    if (it == blocks().end() || (it->second.kind != a && it->second.kind != b)) return false;
    blk = it->second;
    blocks().erase(it);
  }
  if (blk.kind == Kind::device || blk.kind == Kind::managed) g_device_used.fetch_sub(blk.size);
  if (blk.map_len) raw_munmap(reinterpret_cast<void*>(blk.base), blk.map_len);
  return true;
}

// ---- memory --------------------------------------------------------------------------------------

// `stream_ctx`: a stream-ordered call on a created stream, which names its context itself (the real
// driver takes those with no context current, as PyTorch's autograd thread makes them).
CUresult mem_alloc(CUdeviceptr* dptr, size_t bytes, Kind kind, bool stream_ctx = false) {
  FAKE_TRY(stream_ctx ? need_init() : need_ctx());
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (g_device_used.load() + bytes > kTotalMem) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t p = 0;
  FAKE_TRY(new_block(bytes, kind, &p));
  *dptr = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult mem_free(CUdeviceptr p, bool stream_ctx = false) {
  FAKE_TRY(stream_ctx ? need_init() : need_ctx());
  if (p == 0) return CUDA_SUCCESS;  // like cudaFree(NULL)
  return drop_block(static_cast<uintptr_t>(p), Kind::device, Kind::managed) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult host_alloc(void** pp, size_t bytes) {
  FAKE_TRY(need_ctx());
  if (!pp || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t p = 0;
  FAKE_TRY(new_block(bytes, Kind::pinned, &p));
  *pp = reinterpret_cast<void*>(p);
  return CUDA_SUCCESS;
}

CUresult host_register(void* p, size_t bytes) {
  FAKE_TRY(need_ctx());
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto base = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = blocks();
  auto it = m.upper_bound(base + bytes - 1);
  if (it != m.begin()) {
    --it;
    if (it->second.base + it->second.size > base) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  m[base] = Block{base, bytes, 0, Kind::registered};
  return CUDA_SUCCESS;
}

CUresult host_unregister(void* p) {
  FAKE_TRY(need_ctx());
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  if (find_block(reinterpret_cast<uintptr_t>(p), 1, &b)) check_not_held(b.base, b.base + b.size);
  return drop_block(reinterpret_cast<uintptr_t>(p), Kind::registered, Kind::registered)
             ? CUDA_SUCCESS
             : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

}  // namespace

// Test-only (fake_cuda_test.h): memory no entry point handed out.

FAKE_EXPORT CUdeviceptr fake_cuda_alloc_untracked(size_t bytes) {
  uintptr_t p = 0;
  return new_block(bytes, Kind::device, &p) == CUDA_SUCCESS ? static_cast<CUdeviceptr>(p) : 0;
}

FAKE_EXPORT void* fake_cuda_host_alloc_untracked(size_t bytes) {
  uintptr_t p = 0;
  return new_block(bytes, Kind::pinned, &p) == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
}

// ---- pointer queries (what the shim itself uses) ------------------------------------------------------

namespace {
CUresult pointer_attribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  FAKE_TRY(need_init());
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  // Like the real driver for pageable memory it never saw.
  if (!find_block(static_cast<uintptr_t>(ptr), 1, &b)) return CUDA_ERROR_INVALID_VALUE;
  bool host = b.kind == Kind::pinned || b.kind == Kind::registered;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned int*>(data) = b.kind == Kind::managed ? 1u : 0u;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *static_cast<void**>(data) = dp(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(&g_primary_ctx);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(b.base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = b.size;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}
}  // namespace

FAKE_IMPL(cuPointerGetAttribute)(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  FAKE_ENTER(k_cuPointerGetAttribute);
  return pointer_attribute(data, attr, ptr);
}

FAKE_IMPL(cuPointerGetAttributes)(unsigned int n, CUpointer_attribute* attrs, void** data, CUdeviceptr ptr) {
  FAKE_ENTER(k_cuPointerGetAttributes);
  FAKE_TRY(need_init());
  if (n == 0 || !attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  const bool known = find_block(static_cast<uintptr_t>(ptr), 1, &b);
  for (unsigned int i = 0; i < n; ++i) {
    if (known) {
      const CUresult r = pointer_attribute(data[i], attrs[i], ptr);
      if (r != CUDA_SUCCESS) return r;
      continue;
    }
    // As the driver: memory it does not know is no error here, but every answer is the default
    // (a device ordinal of -2: what CuPy then fails to set as the current device).
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data[i]) = -2; break;
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<unsigned int*>(data[i]) = 0; break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data[i]) = 0; break;
      default: *static_cast<uintptr_t*>(data[i]) = 0; break;  // pointers, contexts, addresses
    }
  }
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemGetAddressRange_v2)(CUdeviceptr* pbase, size_t* psize, CUdeviceptr ptr) {
  FAKE_ENTER(k_cuMemGetAddressRange_v2);
  FAKE_TRY(need_ctx());
  Block b;
  if (!find_block(static_cast<uintptr_t>(ptr), 1, &b) || b.kind == Kind::pinned || b.kind == Kind::registered) {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (pbase) *pbase = static_cast<CUdeviceptr>(b.base);
  if (psize) *psize = b.size;
  return CUDA_SUCCESS;
}

// As the driver: a legacy IPC handle only for memory cuMemAlloc made.
FAKE_IMPL(cuIpcGetMemHandle)(CUipcMemHandle* handle, CUdeviceptr ptr) {
  FAKE_ENTER(k_cuIpcGetMemHandle);
  FAKE_TRY(need_ctx());
  Block b;
  if (!handle || !find_block(static_cast<uintptr_t>(ptr), 1, &b) || b.kind != Kind::device) return CUDA_ERROR_INVALID_VALUE;
  std::memset(handle, 0, sizeof(*handle));
  std::memcpy(handle->reserved, &b.base, sizeof(b.base));
  return CUDA_SUCCESS;
}

// ---- allocation ---------------------------------------------------------------------------------------

FAKE_IMPL(cuMemAlloc_v2)(CUdeviceptr* dptr, size_t bytes) {
  FAKE_ENTER(k_cuMemAlloc_v2);
  return mem_alloc(dptr, bytes, Kind::device);
}

FAKE_IMPL(cuMemAllocPitch_v2)(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int elem) {
  FAKE_ENTER(k_cuMemAllocPitch_v2);
  if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
  size_t p = (width + kPitchAlign - 1) / kPitchAlign * kPitchAlign;
  CUresult r = mem_alloc(dptr, p * height, Kind::device);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

// Device memory made the way a module's `__device__` variable is: by no allocation call a hook sees.
FAKE_EXPORT CUdeviceptr fake_cuda_module_global(size_t bytes) {
  uintptr_t p = 0;
  return new_block(bytes, Kind::device, &p) == CUDA_SUCCESS ? static_cast<CUdeviceptr>(p) : 0;
}

FAKE_IMPL(cuMemAllocManaged)(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  FAKE_ENTER(k_cuMemAllocManaged);
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return mem_alloc(dptr, bytes, Kind::managed);
}

FAKE_PAIR(cuMemAllocAsync, cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytes, CUstream s),
          return mem_alloc(dptr, bytes, Kind::device, s != nullptr);)
FAKE_PAIR(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz,
          (CUdeviceptr * dptr, size_t bytes, CUmemoryPool pool, CUstream),
          if (!pool) return CUDA_ERROR_INVALID_VALUE; return mem_alloc(dptr, bytes, Kind::device);)
FAKE_PAIR(cuMemFreeAsync, cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream s), return mem_free(p, s != nullptr);)

FAKE_IMPL(cuMemFree_v2)(CUdeviceptr p) {
  FAKE_ENTER(k_cuMemFree_v2);
  return mem_free(p);
}

FAKE_IMPL(cuMemHostAlloc)(void** pp, size_t bytes, unsigned int flags) {
  FAKE_ENTER(k_cuMemHostAlloc);
  if (flags & ~static_cast<unsigned>(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return host_alloc(pp, bytes);
}

FAKE_IMPL(cuMemAllocHost_v2)(void** pp, size_t bytes) {
  FAKE_ENTER(k_cuMemAllocHost_v2);
  return host_alloc(pp, bytes);
}

FAKE_IMPL(cuMemFreeHost)(void* p) {
  FAKE_ENTER(k_cuMemFreeHost);
  FAKE_TRY(need_ctx());
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  if (find_block(reinterpret_cast<uintptr_t>(p), 1, &b)) check_not_held(b.base, b.base + b.size);
  return drop_block(reinterpret_cast<uintptr_t>(p), Kind::pinned, Kind::pinned) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_IMPL(cuMemHostRegister)(void* p, size_t bytes, unsigned int) {
  FAKE_ENTER(k_cuMemHostRegister);
  return host_register(p, bytes);
}

FAKE_IMPL(cuMemHostRegister_v2)(void* p, size_t bytes, unsigned int) {
  FAKE_ENTER(k_cuMemHostRegister_v2);
  return host_register(p, bytes);
}

FAKE_IMPL(cuMemHostUnregister)(void* p) {
  FAKE_ENTER(k_cuMemHostUnregister);
  return host_unregister(p);
}

FAKE_IMPL(cuMemHostGetDevicePointer_v2)(CUdeviceptr* pdptr, void* p, unsigned int flags) {
  FAKE_ENTER(k_cuMemHostGetDevicePointer_v2);
  FAKE_TRY(need_ctx());
  if (!pdptr || !p || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Block b;
  if (!find_block(reinterpret_cast<uintptr_t>(p), 1, &b) || (b.kind != Kind::pinned && b.kind != Kind::registered)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pdptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuMemGetInfo_v2)(size_t* free_bytes, size_t* total_bytes) {
  FAKE_ENTER(k_cuMemGetInfo_v2);
  FAKE_TRY(need_ctx());
  if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
  *total_bytes = kTotalMem;
  *free_bytes = kTotalMem - g_device_used.load();
  return CUDA_SUCCESS;
}

// ---- unified-memory hints ------------------------------------------------------------------------------

namespace {

CUresult managed_range(CUdeviceptr p, size_t n) {
  FAKE_TRY(need_ctx());
  Block b;
  if (!find_block(static_cast<uintptr_t>(p), n, &b) || b.kind != Kind::managed) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_PAIR(cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz, (CUdeviceptr p, size_t n, CUdevice dev, CUstream),
          if (dev != 0 && dev != CU_DEVICE_CPU) return CUDA_ERROR_INVALID_DEVICE; return managed_range(p, n);)
FAKE_PAIR(cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz,
          (CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream),
          if (flags != 0 || (loc.type != CU_MEM_LOCATION_TYPE_DEVICE && loc.type != CU_MEM_LOCATION_TYPE_HOST))
              return CUDA_ERROR_INVALID_VALUE;
          return managed_range(p, n);)

FAKE_IMPL(cuMemAdvise)(CUdeviceptr p, size_t n, CUmem_advise, CUdevice dev) {
  FAKE_ENTER(k_cuMemAdvise);
  if (dev != 0 && dev != CU_DEVICE_CPU) return CUDA_ERROR_INVALID_DEVICE;
  return managed_range(p, n);
}

FAKE_IMPL(cuMemAdvise_v2)(CUdeviceptr p, size_t n, CUmem_advise, CUmemLocation loc) {
  FAKE_ENTER(k_cuMemAdvise_v2);
  if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE && loc.type != CU_MEM_LOCATION_TYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  return managed_range(p, n);
}

// ---- CUDA arrays ---------------------------------------------------------------------------------
// Opaque handles that take device memory: width x height x depth x channels x the format's bytes
// (plain formats only; others count four bytes a channel), every mip level at the base level's size.

namespace {
std::map<uintptr_t, size_t>& arrays() {
  static auto* m = new std::map<uintptr_t, size_t>;  // leaked: see fake_vmm.cc
  return *m;
}
size_t format_bytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
  }
}
CUresult array_make(uintptr_t* handle, size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned levels) {
  FAKE_TRY(need_ctx());
  if (!handle || w == 0 || ch == 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t bytes = w * (h ? h : 1) * (d ? d : 1) * ch * format_bytes(f) * (levels ? levels : 1);
  if (g_device_used.load() + bytes > kTotalMem) return CUDA_ERROR_OUT_OF_MEMORY;
  g_device_used.fetch_add(bytes);
  std::lock_guard<std::mutex> lock(g_mu);
  static uintptr_t next = 0xa0000;
  next += 0x10;
  arrays()[next] = bytes;
  *handle = next;
  return CUDA_SUCCESS;
}
CUresult array_drop(uintptr_t handle) {
  FAKE_TRY(need_ctx());
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = arrays().find(handle);
  if (it == arrays().end()) return CUDA_ERROR_INVALID_HANDLE;
  g_device_used.fetch_sub(it->second);
  arrays().erase(it);
  return CUDA_SUCCESS;
}
}  // namespace

FAKE_IMPL(cuArrayCreate_v2)(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* d) {
  FAKE_ENTER(k_cuArrayCreate_v2);
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  return array_make(reinterpret_cast<uintptr_t*>(handle), d->Width, d->Height, 0, d->Format, d->NumChannels, 1);
}

FAKE_IMPL(cuArray3DCreate_v2)(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  FAKE_ENTER(k_cuArray3DCreate_v2);
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  return array_make(reinterpret_cast<uintptr_t*>(handle), d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1);
}

FAKE_IMPL(cuMipmappedArrayCreate)(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned int levels) {
  FAKE_ENTER(k_cuMipmappedArrayCreate);
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  return array_make(reinterpret_cast<uintptr_t*>(handle), d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels);
}

FAKE_IMPL(cuArrayDestroy)(CUarray handle) {
  FAKE_ENTER(k_cuArrayDestroy);
  return array_drop(reinterpret_cast<uintptr_t>(handle));
}

FAKE_IMPL(cuMipmappedArrayDestroy)(CUmipmappedArray handle) {
  FAKE_ENTER(k_cuMipmappedArrayDestroy);
  return array_drop(reinterpret_cast<uintptr_t>(handle));
}

// ---- graphs, as far as their memory nodes go -----------------------------------------------------
// A graph is a handle; a node records its type and, for a memory node, its allocation or the
// pointer it frees. An allocation node's memory is made when the node is added (the real driver
// reserves the address then and backs it when the graph runs) and goes with its graph.

namespace {

struct FakeNode {
  uintptr_t graph;
  CUgraphNodeType type;
  CUDA_MEM_ALLOC_NODE_PARAMS alloc;  // type MEM_ALLOC
  CUdeviceptr freed;                 // type MEM_FREE
};
std::mutex g_graph_mu;
std::map<uintptr_t, FakeNode>& graph_nodes() {
  static auto* m = new std::map<uintptr_t, FakeNode>;
  return *m;
}
std::atomic<uintptr_t> g_next_graph{0x6000};

CUresult add_node(CUgraphNode* node, CUgraph graph, size_t deps, const CUgraphNode* dep, FakeNode n) {
  if (!node || !graph || (deps && !dep)) return CUDA_ERROR_INVALID_VALUE;
  n.graph = reinterpret_cast<uintptr_t>(graph);
  if (n.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    if (n.alloc.bytesize == 0 || n.alloc.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    FAKE_TRY(mem_alloc(&n.alloc.dptr, n.alloc.bytesize, Kind::device));
  } else if (n.type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
    Block blk;
    if (!find_block(static_cast<uintptr_t>(n.freed), 1, &blk) || blk.base != n.freed) return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(g_graph_mu);
  const uintptr_t h = g_next_graph.fetch_add(16);
  graph_nodes()[h] = n;
  *node = reinterpret_cast<CUgraphNode>(h);
  return CUDA_SUCCESS;
}

CUresult add_node(CUgraphNode* node, CUgraph graph, const CUgraphNode* dep, size_t deps, CUgraphNodeParams* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  FakeNode n{};
  n.type = p->type;
  if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    std::memcpy(&n.alloc, &p->alloc, sizeof n.alloc);  // the _v2 parameters have the same layout
  } else if (p->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
    n.freed = p->free.dptr;
  } else if (p->type != CU_GRAPH_NODE_TYPE_EMPTY) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUresult r = add_node(node, graph, deps, dep, n);
  if (r == CUDA_SUCCESS && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    p->alloc.dptr = graph_nodes()[reinterpret_cast<uintptr_t>(*node)].alloc.dptr;
  }
  return r;
}

}  // namespace

FAKE_IMPL(cuGraphCreate)(CUgraph* graph, unsigned int flags) {
  FAKE_ENTER(k_cuGraphCreate);
  FAKE_TRY(need_ctx());
  if (!graph || flags) return CUDA_ERROR_INVALID_VALUE;
  *graph = reinterpret_cast<CUgraph>(g_next_graph.fetch_add(16));
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuGraphDestroy)(CUgraph graph) {
  FAKE_ENTER(k_cuGraphDestroy);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUdeviceptr> made;
  {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    for (auto it = graph_nodes().begin(); it != graph_nodes().end();) {
      if (it->second.graph != reinterpret_cast<uintptr_t>(graph)) {
        ++it;
        continue;
      }
      if (it->second.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) made.push_back(it->second.alloc.dptr);
      it = graph_nodes().erase(it);
    }
  }
  for (CUdeviceptr p : made) drop_block(static_cast<uintptr_t>(p), Kind::device, Kind::device);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuGraphAddEmptyNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* dep, size_t deps) {
  FAKE_ENTER(k_cuGraphAddEmptyNode);
  FakeNode n{};
  n.type = CU_GRAPH_NODE_TYPE_EMPTY;
  return add_node(node, graph, deps, dep, n);
}

FAKE_IMPL(cuGraphAddMemAllocNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* dep, size_t deps,
                                  CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  FAKE_ENTER(k_cuGraphAddMemAllocNode);
  FAKE_TRY(need_ctx());
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  FakeNode n{};
  n.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  n.alloc = *params;
  CUresult r = add_node(node, graph, deps, dep, n);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    params->dptr = graph_nodes()[reinterpret_cast<uintptr_t>(*node)].alloc.dptr;
  }
  return r;
}

FAKE_IMPL(cuGraphAddMemFreeNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* dep, size_t deps, CUdeviceptr p) {
  FAKE_ENTER(k_cuGraphAddMemFreeNode);
  FAKE_TRY(need_ctx());
  FakeNode n{};
  n.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  n.freed = p;
  return add_node(node, graph, deps, dep, n);
}

FAKE_IMPL(cuGraphMemAllocNodeGetParams)(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  FAKE_ENTER(k_cuGraphMemAllocNodeGetParams);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_graph_mu);
  auto it = graph_nodes().find(reinterpret_cast<uintptr_t>(node));
  if (it == graph_nodes().end() || it->second.type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_INVALID_VALUE;
  *out = it->second.alloc;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuGraphAddNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* dep, size_t deps, CUgraphNodeParams* p) {
  FAKE_ENTER(k_cuGraphAddNode);
  FAKE_TRY(need_ctx());
  return add_node(node, graph, dep, deps, p);
}

FAKE_IMPL(cuGraphAddNode_v2)(CUgraphNode* node, CUgraph graph, const CUgraphNode* dep, const CUgraphEdgeData*,
                             size_t deps, CUgraphNodeParams* p) {
  FAKE_ENTER(k_cuGraphAddNode_v2);
  FAKE_TRY(need_ctx());
  return add_node(node, graph, dep, deps, p);
}

FAKE_EXPORT int fake_cuda_node_type(CUgraphNode node) {
  std::lock_guard<std::mutex> lock(g_graph_mu);
  auto it = graph_nodes().find(reinterpret_cast<uintptr_t>(node));
  return it == graph_nodes().end() ? -1 : static_cast<int>(it->second.type);
}
