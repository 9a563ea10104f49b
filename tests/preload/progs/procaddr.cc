// (c) The CUDA runtime's way in: dlsym(libcuda, "cuGetProcAddress_v2"), then every entry point by
// its base name, with old version numbers and with flags 0 and 2 (per-thread default stream).
//
// 1. Spot checks written out by hand: what the real driver answers (cuMemAlloc at 3020 is
//    cuMemAlloc_v2, cuMemAdvise at 12020 is cuMemAdvise_v2, batch copies at 12.8 and 13.0, flag 2 ...).
// 2. A sweep over every base name in proc_table.def, versions 3020..13000, flags 0/1/2, through
//    cuGetProcAddress_v2, through the legacy cuGetProcAddress and through the cuGetProcAddress the
//    driver itself hands out: the pointer must be exactly what dlsym(libcuda, <implementation>)
//    gives (with the shim: the same hook), and with the shim a hooked implementation must be a hook.
// 3. The standard workload through the looked-up pointers, flags 0 then 2.
// 4. Every hooked implementation (all of cuda_hooks.def) called once through the pointer
//    cuGetProcAddress returned: each call must reach exactly that implementation of the stand-in,
//    once, and no other hooked implementation. The runner checks what the shim counted (EveryHook).
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"

namespace {

constexpr size_t S = 4096;
constexpr size_t kVmm = 2u << 20;

struct ProcEntry {
  const char* base;
  int version;
  const char* impl;
  const char* per_thread;  // nullptr: none
};
const ProcEntry kTable[] = {
#define FAKE_PROC(base, version, impl) {#base, version, #impl, nullptr},
#define FAKE_PROC_PT(base, version, impl, pt) {#base, version, #impl, #pt},
#include "proc_table.def"
#undef FAKE_PROC
#undef FAKE_PROC_PT
};

const char* const kHooked[] = {
#define GMS_HOOK(sym, pfn, family) #sym,
#include "driver/cuda_hooks.def"
#undef GMS_HOOK
};

bool g_shim = false;
void* g_lib = nullptr;
fake_cuda_calls_fn g_calls = nullptr;
PFN_cuGetProcAddress_v12000 g_gpa2 = nullptr;  // from dlsym
PFN_cuGetProcAddress_v11030 g_gpa1 = nullptr;  // from dlsym
PFN_cuGetProcAddress_v12000 g_gpa2_self = nullptr;  // from cuGetProcAddress_v2("cuGetProcAddress", 12000)

bool is_hooked(const char* impl) {
  for (const char* h : kHooked) {
    if (std::strcmp(h, impl) == 0) return true;
  }
  return false;
}

// What the driver must answer, from the table: the implementation with the highest first version
// not above `version`, its per-thread form with flag 2 where there is one.
const char* expected_impl(const char* base, int version, int flags, CUdriverProcAddressQueryResult* st) {
  const ProcEntry* best = nullptr;
  bool known = false;
  for (const ProcEntry& e : kTable) {
    if (std::strcmp(e.base, base) != 0) continue;
    known = true;
    if (e.version <= version && (!best || e.version > best->version)) best = &e;
  }
  if (!best) {
    *st = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return nullptr;
  }
  *st = CU_GET_PROC_ADDRESS_SUCCESS;
  return (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->per_thread ? best->per_thread : best->impl;
}

// One query through all three ways in; `impl` is the answer expected (nullptr: not found, `st`).
void expect_proc(const char* base, int version, int flags, const char* impl, CUdriverProcAddressQueryResult want_st) {
  void* want = impl ? dlsym(g_lib, impl) : nullptr;
  if (impl) {
    if (!want) {
      std::fprintf(stderr, "dlsym(libcuda, %s) failed\n", impl);
      std::exit(1);
    }
    preload::check_hooked(want, g_shim && is_hooked(impl), impl);
  }
  for (int way = 0; way < 3; ++way) {
    void* p = reinterpret_cast<void*>(0x1);
    CUdriverProcAddressQueryResult st = static_cast<CUdriverProcAddressQueryResult>(-1);
    CUresult r;
    if (way == 0) {
      r = g_gpa2(base, &p, version, static_cast<cuuint64_t>(flags), &st);
    } else if (way == 1) {
      r = g_gpa1(base, &p, version, static_cast<cuuint64_t>(flags));
      st = r == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : want_st;
    } else {
      r = g_gpa2_self(base, &p, version, static_cast<cuuint64_t>(flags), &st);
    }
    CUresult want_r = impl ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    if (r != want_r || p != want || st != want_st) {
      std::fprintf(stderr,
                   "cuGetProcAddress%s(\"%s\", %d, flags %d): result %d, pointer %p (%s), status %d; expected %d, %p (%s), "
                   "status %d\n",
                   way == 1 ? "" : "_v2", base, version, flags, (int)r, p, preload::object_of(p), (int)st, (int)want_r,
                   want, impl ? impl : "none", (int)want_st);
      std::exit(1);
    }
  }
}

void spot_checks() {
  using R = CUdriverProcAddressQueryResult;
  const R ok = CU_GET_PROC_ADDRESS_SUCCESS;
  const R nf = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const R vns = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  const int pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  expect_proc("cuMemAlloc", 3020, 0, "cuMemAlloc_v2", ok);
  expect_proc("cuMemAlloc", 13000, pt, "cuMemAlloc_v2", ok);  // no per-thread form
  expect_proc("cuMemAlloc", 2000, 0, nullptr, vns);           // the 32-bit original is not provided
  expect_proc("cuMemFree", 3020, 0, "cuMemFree_v2", ok);
  expect_proc("cuMemcpyHtoD", 3020, 0, "cuMemcpyHtoD_v2", ok);
  expect_proc("cuMemcpyHtoD", 3020, pt, "cuMemcpyHtoD_v2_ptds", ok);
  expect_proc("cuMemcpyHtoD", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemcpyHtoD_v2", ok);
  expect_proc("cuMemcpyHtoDAsync", 13000, pt, "cuMemcpyHtoDAsync_v2_ptsz", ok);
  expect_proc("cuMemcpy", 4000, pt, "cuMemcpy_ptds", ok);
  expect_proc("cuMemsetD8", 3020, pt, "cuMemsetD8_v2_ptds", ok);
  expect_proc("cuMemsetD8Async", 3020, pt, "cuMemsetD8Async_ptsz", ok);
  expect_proc("cuLaunchKernel", 4000, 0, "cuLaunchKernel", ok);
  expect_proc("cuLaunchKernel", 7000, pt, "cuLaunchKernel_ptsz", ok);
  expect_proc("cuLaunchKernelEx", 11060, pt, "cuLaunchKernelEx_ptsz", ok);
  expect_proc("cuLaunchKernelEx", 11040, 0, nullptr, vns);
  expect_proc("cuGraphLaunch", 10000, pt, "cuGraphLaunch_ptsz", ok);
  expect_proc("cuMemAdvise", 8000, 0, "cuMemAdvise", ok);
  expect_proc("cuMemAdvise", 12010, 0, "cuMemAdvise", ok);
  expect_proc("cuMemAdvise", 12020, 0, "cuMemAdvise_v2", ok);
  expect_proc("cuMemAdvise", 13000, pt, "cuMemAdvise_v2", ok);
  expect_proc("cuMemPrefetchAsync", 8000, pt, "cuMemPrefetchAsync_ptsz", ok);
  expect_proc("cuMemPrefetchAsync", 12020, 0, "cuMemPrefetchAsync_v2", ok);
  expect_proc("cuMemPrefetchAsync", 12020, pt, "cuMemPrefetchAsync_v2_ptsz", ok);
  expect_proc("cuMemHostRegister", 4000, 0, "cuMemHostRegister", ok);
  expect_proc("cuMemHostRegister", 6050, 0, "cuMemHostRegister_v2", ok);
  expect_proc("cuMemcpyBatchAsync", 12000, 0, nullptr, vns);
  expect_proc("cuMemcpyBatchAsync", 12080, 0, "cuMemcpyBatchAsync", ok);
  expect_proc("cuMemcpyBatchAsync", 12090, pt, "cuMemcpyBatchAsync_ptsz", ok);
  expect_proc("cuMemcpyBatchAsync", 13000, 0, "cuMemcpyBatchAsync_v2", ok);
  expect_proc("cuMemcpyBatchAsync", 13000, pt, "cuMemcpyBatchAsync_v2_ptsz", ok);
  expect_proc("cuMemcpy3DBatchAsync", 12080, 0, "cuMemcpy3DBatchAsync", ok);
  expect_proc("cuMemcpy3DBatchAsync", 13000, pt, "cuMemcpy3DBatchAsync_v2_ptsz", ok);
  expect_proc("cuMemAllocAsync", 11020, pt, "cuMemAllocAsync_ptsz", ok);
  expect_proc("cuMemAllocAsync", 11010, 0, nullptr, vns);
  expect_proc("cuGetProcAddress", 11020, 0, nullptr, vns);
  expect_proc("cuGetProcAddress", 11030, 0, "cuGetProcAddress", ok);
  expect_proc("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", ok);
  expect_proc("cuGetProcAddress", 13000, pt, "cuGetProcAddress_v2", ok);
  expect_proc("cuInit", 2000, 0, "cuInit", ok);  // not hooked: the driver's own
  expect_proc("cuStreamSynchronize", 2000, pt, "cuStreamSynchronize_ptsz", ok);
  expect_proc("cuMemAlloc_v2", 13000, 0, nullptr, nf);  // base names only
  expect_proc("cuNoSuchEntryPoint", 13000, 0, nullptr, nf);
  expect_proc("", 13000, 0, nullptr, nf);
}

int sweep() {
  static const int kVersions[] = {2000, 3000, 3020, 4000, 6000, 6050, 7000, 8000, 9000, 10000, 10020, 11000,
                                  11020, 11030, 11060, 12000, 12020, 12040, 12080, 12090, 13000, 13010};
  std::set<std::string> bases;
  for (const ProcEntry& e : kTable) bases.insert(e.base);
  int checked = 0;
  for (const std::string& b : bases) {
    for (int v : kVersions) {
      for (int flags : {0, 1, 2}) {
        CUdriverProcAddressQueryResult st;
        const char* impl = expected_impl(b.c_str(), v, flags, &st);
        expect_proc(b.c_str(), v, flags, impl, st);
        ++checked;
      }
    }
  }
  // Every hooked implementation is reachable through some query.
  for (const char* h : kHooked) {
    bool found = false;
    for (const ProcEntry& e : kTable) {
      found = found || std::strcmp(e.impl, h) == 0 || (e.per_thread && std::strcmp(e.per_thread, h) == 0);
    }
    if (!found) {
      std::fprintf(stderr, "%s cannot be reached through cuGetProcAddress\n", h);
      std::exit(1);
    }
  }
  return checked;
}

// ---- every hooked implementation, once -------------------------------------------------------------

// The hooked implementation the shim also calls for its own purposes (which device, what kind of
// memory): those calls are not the program's, so it counts only when the program calls it (one()).
bool shim_also_calls(const char* impl) { return std::strcmp(impl, "cuPointerGetAttribute") == 0; }

unsigned long hooked_total() {
  unsigned long n = 0;
  for (const char* h : kHooked) n += shim_also_calls(h) ? 0 : g_calls(h);
  return n;
}

// The entry point for an implementation, looked up the way the runtime would (base name, the
// implementation's first version, flag 2 for per-thread forms), alternating between the ways in.
int g_way = 0;
template <typename F>
F get(const char* impl) {
  for (const ProcEntry& e : kTable) {
    bool pt = e.per_thread && std::strcmp(e.per_thread, impl) == 0;
    if (!pt && std::strcmp(e.impl, impl) != 0) continue;
    void* p = nullptr;
    int flags = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
    CUdriverProcAddressQueryResult st;
    switch (g_way++ % 3) {
      case 0: CK(g_gpa2(e.base, &p, e.version, flags, &st)); break;
      case 1: CK(g_gpa1(e.base, &p, e.version, flags)); break;
      default: CK(g_gpa2_self(e.base, &p, e.version, flags, &st)); break;
    }
    CHECK(p == dlsym(g_lib, impl));
    preload::check_hooked(p, g_shim && is_hooked(impl), impl);
    return reinterpret_cast<F>(p);
  }
  std::fprintf(stderr, "%s is not in the table\n", impl);
  std::exit(1);
}

std::set<std::string> g_called;

// Calls `call` (which calls `impl` once through a looked-up pointer) and checks that exactly that
// implementation was reached, exactly once.
template <typename Call>
void one(const char* impl, CUresult want, Call&& call) {
  unsigned long mine = g_calls(impl);
  unsigned long all = hooked_total();
  CUresult r = call();
  if (r != want) {
    std::fprintf(stderr, "%s returned %d, expected %d\n", impl, (int)r, (int)want);
    std::exit(1);
  }
  unsigned long got = g_calls(impl) - mine, got_all = hooked_total() - all + (shim_also_calls(impl) ? 1 : 0);
  if (got != 1 || got_all != 1) {
    std::fprintf(stderr, "%s: reached %lu times, hooked implementations reached %lu times; expected 1 and 1\n", impl, got,
                 got_all);
    std::exit(1);
  }
  g_called.insert(impl);
}
// The lookup happens before the call is measured. The name is stringified right here: passed on
// unquoted, cuda.h's macros would turn cuMemcpyBatchAsync into cuMemcpyBatchAsync_v2 on the way.
#define ONE_NAMED(want, name, pfn, ...)                             \
  do {                                                              \
    pfn one_fn_ = get<pfn>(name);                                   \
    one(name, want, [&] { return one_fn_(__VA_ARGS__); });          \
  } while (0)
#define ONE_R(want, impl, pfn, ...) ONE_NAMED(want, #impl, pfn, __VA_ARGS__)
#define ONE(impl, pfn, ...) ONE_NAMED(CUDA_SUCCESS, #impl, pfn, __VA_ARGS__)

uint32_t g_kernel_hits = 0;
void k_count(void** p) {
  uint32_t* x = preload::dev_ptr<uint32_t>(*static_cast<CUdeviceptr*>(p[0]));
  ++*x;
  ++g_kernel_hits;
}

template <typename T>
bool all_eq(CUdeviceptr p, size_t count, T v) {
  const T* x = preload::dev_ptr<T>(p);
  for (size_t i = 0; i < count; ++i) {
    if (x[i] != v) return false;
  }
  return true;
}
template <typename T>
bool rows_eq(CUdeviceptr p, size_t pitch, size_t w, size_t h, T v) {
  for (size_t y = 0; y < h; ++y) {
    if (!all_eq<T>(p + y * pitch, w, v)) return false;
  }
  return true;
}
void fill(void* p, size_t n, unsigned char seed) {
  auto* c = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) c[i] = static_cast<unsigned char>(i * 31 + seed);
}
bool same(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }
void* host(CUdeviceptr p) { return preload::dev_ptr<void>(p); }
CUdeviceptr dev(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

CUDA_MEMCPY2D copy2d(CUmemorytype st, const void* s, size_t spitch, CUmemorytype dt, void* d, size_t dpitch) {
  CUDA_MEMCPY2D c = {};
  c.srcMemoryType = st;
  c.srcHost = s;
  c.srcDevice = dev(s);
  c.srcPitch = spitch;
  c.dstMemoryType = dt;
  c.dstHost = d;
  c.dstDevice = dev(d);
  c.dstPitch = dpitch;
  c.WidthInBytes = 256;
  c.Height = 16;
  return c;
}
template <typename C>
C copy3d(CUmemorytype st, const void* s, CUmemorytype dt, void* d) {
  C c = {};
  c.srcMemoryType = st;
  c.srcHost = s;
  c.srcDevice = dev(s);
  c.srcPitch = 256;
  c.srcHeight = 4;
  c.dstMemoryType = dt;
  c.dstHost = d;
  c.dstDevice = dev(d);
  c.dstPitch = 256;
  c.dstHeight = 4;
  c.WidthInBytes = 256;
  c.Height = 4;
  c.Depth = 4;
  return c;
}
CUDA_MEMCPY3D_BATCH_OP op3d(CUdeviceptr d, CUdeviceptr s, size_t w, size_t h, size_t depth) {
  CUDA_MEMCPY3D_BATCH_OP op = {};
  op.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.src.op.ptr.ptr = s;
  op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.dst.op.ptr.ptr = d;
  op.extent = {w, h, depth};
  op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  return op;
}

// The order and the bytes here are what the runner's EveryHook model replays; keep them in step.
void every_hook(CUcontext ctx, CUstream s) {
  const int pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  (void)pt;
  CUmemoryPool pool = nullptr;
  CK(get<PFN_cuDeviceGetDefaultMemPool_v11020>("cuDeviceGetDefaultMemPool")(&pool, 0));
  auto* hp = static_cast<unsigned char*>(std::malloc(S));  // pageable
  auto* hp1 = static_cast<unsigned char*>(std::aligned_alloc(4096, S));  // registered below
  auto* hp2 = static_cast<unsigned char*>(std::aligned_alloc(4096, S));
  auto* ref = static_cast<unsigned char*>(std::malloc(S));
  CHECK(hp && hp1 && hp2 && ref);

  // ---- allocations: device 5 S + 8 KiB (pitch), managed S, pinned 2 S, registered 2 S, VMM 2 MiB
  CUdeviceptr d1 = 0, d2 = 0, d3 = 0, d4 = 0, d5 = 0, d6 = 0, m1 = 0;
  size_t pitch = 0;
  ONE(cuMemAlloc_v2, PFN_cuMemAlloc_v3020, &d1, S);
  ONE(cuMemAllocPitch_v2, PFN_cuMemAllocPitch_v3020, &d2, &pitch, 256, 16, 4);
  CHECK(pitch == 512);
  ONE(cuMemAllocManaged, PFN_cuMemAllocManaged_v6000, &m1, S, CU_MEM_ATTACH_GLOBAL);
  ONE(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020, &d3, S, s);
  ONE(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020_ptsz, &d4, S, s);
  ONE(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020, &d5, S, pool, s);
  ONE(cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync_v11020_ptsz, &d6, S, pool, s);
  unsigned char *h1 = nullptr, *h2 = nullptr;
  ONE(cuMemHostAlloc, PFN_cuMemHostAlloc_v2020, reinterpret_cast<void**>(&h1), S, 0u);
  ONE(cuMemAllocHost_v2, PFN_cuMemAllocHost_v3020, reinterpret_cast<void**>(&h2), S);
  ONE(cuMemHostRegister, PFN_cuMemHostRegister_v6050, hp1, S, 0u);  // same type as the v4000 form
  ONE(cuMemHostRegister_v2, PFN_cuMemHostRegister_v6050, hp2, S, 0u);
  size_t free_b = 0, total = 0;
  ONE(cuMemGetInfo_v2, PFN_cuMemGetInfo_v3020, &free_b, &total);
  CHECK(total == preload::kTotalMem);
  unsigned int type = 0;
  ONE(cuPointerGetAttribute, PFN_cuPointerGetAttribute_v4000, &type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d1);
  CHECK(type == CU_MEMORYTYPE_DEVICE);
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
  unsigned int managed = 0;
  void* answers[] = {&type, &managed};
  ONE(cuPointerGetAttributes, PFN_cuPointerGetAttributes_v7000, 2u, attrs, answers, m1);
  CHECK(managed == 1);
  CUdeviceptr range_base = 0;
  size_t range_size = 0;
  ONE(cuMemGetAddressRange_v2, PFN_cuMemGetAddressRange_v3020, &range_base, &range_size, d1 + 16);
  CHECK(range_base == d1 && range_size >= 16);
  CUipcMemHandle ipc;
  ONE(cuIpcGetMemHandle, PFN_cuIpcGetMemHandle_v4010, &ipc, d1);  // 4 KiB: ordinary memory under any policy

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  size_t gran = 0;
  CK(get<PFN_cuMemGetAllocationGranularity_v10020>("cuMemGetAllocationGranularity")(&gran, &prop,
                                                                                  CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CHECK(gran == kVmm);
  CUdeviceptr va = 0;
  CK(get<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve")(&va, kVmm, 0, 0, 0));
  CUmemGenericAllocationHandle hdl = 0;
  ONE(cuMemCreate, PFN_cuMemCreate_v10020, &hdl, kVmm, &prop, 0ull);
  ONE(cuMemMap, PFN_cuMemMap_v10020, va, kVmm, 0, hdl, 0ull);
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(get<PFN_cuMemSetAccess_v10020>("cuMemSetAccess")(va, kVmm, &access, 1));
  std::memset(host(va), 0x5c, kVmm);  // mapped and writable
  CUmemGenericAllocationHandle again = 0;
  ONE(cuMemRetainAllocationHandle, PFN_cuMemRetainAllocationHandle_v11000, &again, reinterpret_cast<void*>(va));
  CHECK(again == hdl);
  // CUDA arrays: 1D, 3D and mipmapped, counted against the budget until destroyed.
  CUarray ar1 = nullptr, ar3 = nullptr;
  CUmipmappedArray mip = nullptr;
  CUDA_ARRAY_DESCRIPTOR ad = {};
  ad.Width = 256;
  ad.Format = CU_AD_FORMAT_FLOAT;
  ad.NumChannels = 1;
  ONE(cuArrayCreate_v2, PFN_cuArrayCreate_v3020, &ar1, &ad);
  CUDA_ARRAY3D_DESCRIPTOR ad3 = {};
  ad3.Width = ad3.Height = ad3.Depth = 8;
  ad3.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  ad3.NumChannels = 4;
  ONE(cuArray3DCreate_v2, PFN_cuArray3DCreate_v3020, &ar3, &ad3);
  ONE(cuMipmappedArrayCreate, PFN_cuMipmappedArrayCreate_v5000, &mip, &ad3, 2u);
  ONE(cuArrayDestroy, PFN_cuArrayDestroy_v2000, ar1);
  CK(get<PFN_cuArrayDestroy_v2000>("cuArrayDestroy")(ar3));
  ONE(cuMipmappedArrayDestroy, PFN_cuMipmappedArrayDestroy_v5000, mip);
  // Graph memory nodes added by hand (within the budget: the program's own nodes).
  CUgraph mgraph = nullptr;
  CK(get<PFN_cuGraphCreate_v10000>("cuGraphCreate")(&mgraph, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS gp = {};
  gp.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  gp.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  gp.bytesize = S;
  CUgraphNode gn = nullptr, gf = nullptr;
  ONE(cuGraphAddMemAllocNode, PFN_cuGraphAddMemAllocNode_v11040, &gn, mgraph, nullptr, 0, &gp);
  CUDA_MEM_ALLOC_NODE_PARAMS gq = {};
  ONE(cuGraphMemAllocNodeGetParams, PFN_cuGraphMemAllocNodeGetParams_v11040, gn, &gq);
  CHECK(gq.dptr == gp.dptr && gq.bytesize == S);
  ONE(cuGraphAddMemFreeNode, PFN_cuGraphAddMemFreeNode_v11040, &gf, mgraph, &gn, 1, gp.dptr);
  CUgraphNodeParams np = {};
  np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  std::memcpy(&np.alloc, &gp, sizeof gp);
  np.alloc.dptr = 0;
  ONE(cuGraphAddNode, PFN_cuGraphAddNode_v12020, &gn, mgraph, nullptr, 0, &np);
  CUgraphNodeParams fp = {};
  fp.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  fp.free.dptr = np.alloc.dptr;
  ONE(cuGraphAddNode_v2, PFN_cuGraphAddNode_v12030, &gf, mgraph, &gn, nullptr, 1, &fp);
  CK(get<PFN_cuGraphDestroy_v10000>("cuGraphDestroy")(mgraph));
  // The malloc heap at its starting size: nothing to count.
  ONE(cuCtxSetLimit, PFN_cuCtxSetLimit_v3010, CU_LIMIT_MALLOC_HEAP_SIZE, size_t{8} << 20);

  // ---- linear copies
  fill(hp, S, 1);
  std::memcpy(ref, hp, S);
  ONE(cuMemcpyHtoD_v2, PFN_cuMemcpyHtoD_v3020, d1, hp, S);                       // htod pageable
  CHECK(same(host(d1), ref, S));
  ONE(cuMemcpyHtoD_v2_ptds, PFN_cuMemcpyHtoD_v7000_ptds, d3, hp, S);             // htod pageable
  CHECK(same(host(d3), ref, S));
  std::memset(hp, 0, S);
  ONE(cuMemcpyDtoH_v2, PFN_cuMemcpyDtoH_v3020, hp, d1, S);                       // dtoh pageable
  CHECK(same(hp, ref, S));
  std::memset(hp, 0, S);
  ONE(cuMemcpyDtoH_v2_ptds, PFN_cuMemcpyDtoH_v7000_ptds, hp, d3, S);             // dtoh pageable
  CHECK(same(hp, ref, S));
  ONE(cuMemcpyDtoD_v2, PFN_cuMemcpyDtoD_v3020, d4, d1, S);                       // dtod
  ONE(cuMemcpyDtoD_v2_ptds, PFN_cuMemcpyDtoD_v7000_ptds, d5, d1, S);             // dtod
  ONE(cuMemcpy, PFN_cuMemcpy_v4000, d6, d1, S);                                  // dtod (both known)
  CHECK(same(host(d4), ref, S) && same(host(d5), ref, S) && same(host(d6), ref, S));
  std::memset(hp, 0, S);
  ONE(cuMemcpy_ptds, PFN_cuMemcpy_v7000_ptds, dev(hp), d1, S);                   // dtoh pageable (driver asked)
  CHECK(same(hp, ref, S));
  ONE(cuMemcpyAsync, PFN_cuMemcpyAsync_v4000, m1, d1, S, s);                     // dtoh managed
  CHECK(same(host(m1), ref, S));
  fill(hp2, S, 2);
  ONE(cuMemcpyAsync_ptsz, PFN_cuMemcpyAsync_v7000_ptsz, d1, dev(hp2), S, s);     // htod pinned (registered)
  CHECK(same(host(d1), hp2, S));
  fill(h1, S, 3);
  ONE(cuMemcpyHtoDAsync_v2, PFN_cuMemcpyHtoDAsync_v3020, d1, h1, S, s);          // htod pinned
  CHECK(same(host(d1), h1, S));
  fill(h2, S, 4);
  ONE(cuMemcpyHtoDAsync_v2_ptsz, PFN_cuMemcpyHtoDAsync_v7000_ptsz, d1, h2, S, s);  // htod pinned
  CHECK(same(host(d1), h2, S));
  ONE(cuMemcpyDtoHAsync_v2, PFN_cuMemcpyDtoHAsync_v3020, hp1, d1, S, s);         // dtoh pinned (registered)
  CHECK(same(hp1, h2, S));
  ONE(cuMemcpyDtoHAsync_v2_ptsz, PFN_cuMemcpyDtoHAsync_v7000_ptsz, host(m1), d1, S, s);  // dtoh managed
  CHECK(same(host(m1), h2, S));
  ONE(cuMemcpyDtoDAsync_v2, PFN_cuMemcpyDtoDAsync_v3020, d3, d1, S, s);          // dtod
  ONE(cuMemcpyDtoDAsync_v2_ptsz, PFN_cuMemcpyDtoDAsync_v7000_ptsz, d4, d1, S, s);  // dtod
  CHECK(same(host(d3), h2, S) && same(host(d4), h2, S));
  ONE(cuMemcpyPeer, PFN_cuMemcpyPeer_v4000, d5, ctx, d1, ctx, S);                // peer
  ONE(cuMemcpyPeer_ptds, PFN_cuMemcpyPeer_v7000_ptds, d6, ctx, d1, ctx, S);      // peer
  ONE(cuMemcpyPeerAsync, PFN_cuMemcpyPeerAsync_v4000, d5, ctx, d1, ctx, S, s);   // peer
  ONE(cuMemcpyPeerAsync_ptsz, PFN_cuMemcpyPeerAsync_v7000_ptsz, d6, ctx, d1, ctx, S, s);  // peer
  CHECK(same(host(d5), h2, S) && same(host(d6), h2, S));

  // ---- 2D and 3D copies: 256 x 16 (pitch 512 on d2) and 256 x 4 x 4, 4 KiB each
  fill(hp, S, 5);
  std::memcpy(ref, hp, S);
  CUDA_MEMCPY2D c2 = copy2d(CU_MEMORYTYPE_HOST, hp, 256, CU_MEMORYTYPE_DEVICE, host(d2), pitch);
  ONE(cuMemcpy2D_v2, PFN_cuMemcpy2D_v3020, &c2);                                 // htod pageable
  for (size_t y = 0; y < 16; ++y) CHECK(same(static_cast<unsigned char*>(host(d2)) + y * pitch, ref + y * 256, 256));
  std::memset(hp, 0, S);
  c2 = copy2d(CU_MEMORYTYPE_DEVICE, host(d2), pitch, CU_MEMORYTYPE_HOST, hp, 256);
  ONE(cuMemcpy2D_v2_ptds, PFN_cuMemcpy2D_v7000_ptds, &c2);                       // dtoh pageable
  CHECK(same(hp, ref, S));
  c2 = copy2d(CU_MEMORYTYPE_DEVICE, host(d2), pitch, CU_MEMORYTYPE_DEVICE, host(d1), 256);
  ONE(cuMemcpy2DUnaligned_v2, PFN_cuMemcpy2DUnaligned_v3020, &c2);               // dtod
  CHECK(same(host(d1), ref, S));
  fill(hp, S, 6);
  std::memcpy(ref, hp, S);
  c2 = copy2d(CU_MEMORYTYPE_UNIFIED, hp, 256, CU_MEMORYTYPE_DEVICE, host(d2), pitch);
  ONE(cuMemcpy2DUnaligned_v2_ptds, PFN_cuMemcpy2DUnaligned_v7000_ptds, &c2);     // htod pageable (driver asked)
  for (size_t y = 0; y < 16; ++y) CHECK(same(static_cast<unsigned char*>(host(d2)) + y * pitch, ref + y * 256, 256));
  c2 = copy2d(CU_MEMORYTYPE_HOST, h1, 256, CU_MEMORYTYPE_DEVICE, host(d2), pitch);
  ONE(cuMemcpy2DAsync_v2, PFN_cuMemcpy2DAsync_v3020, &c2, s);                    // htod pinned
  c2 = copy2d(CU_MEMORYTYPE_DEVICE, host(d2), pitch, CU_MEMORYTYPE_HOST, hp1, 256);
  ONE(cuMemcpy2DAsync_v2_ptsz, PFN_cuMemcpy2DAsync_v7000_ptsz, &c2, s);          // dtoh pinned (registered)
  CHECK(same(hp1, h1, S));
  fill(hp, S, 7);
  std::memcpy(ref, hp, S);
  CUDA_MEMCPY3D c3 = copy3d<CUDA_MEMCPY3D>(CU_MEMORYTYPE_HOST, hp, CU_MEMORYTYPE_DEVICE, host(d1));
  ONE(cuMemcpy3D_v2, PFN_cuMemcpy3D_v3020, &c3);                                 // htod pageable
  CHECK(same(host(d1), ref, S));
  c3 = copy3d<CUDA_MEMCPY3D>(CU_MEMORYTYPE_DEVICE, host(d1), CU_MEMORYTYPE_DEVICE, host(d3));
  ONE(cuMemcpy3D_v2_ptds, PFN_cuMemcpy3D_v7000_ptds, &c3);                       // dtod
  CHECK(same(host(d3), ref, S));
  c3 = copy3d<CUDA_MEMCPY3D>(CU_MEMORYTYPE_DEVICE, host(d1), CU_MEMORYTYPE_HOST, h1);
  ONE(cuMemcpy3DAsync_v2, PFN_cuMemcpy3DAsync_v3020, &c3, s);                    // dtoh pinned
  CHECK(same(h1, ref, S));
  fill(host(m1), S, 8);
  c3 = copy3d<CUDA_MEMCPY3D>(CU_MEMORYTYPE_UNIFIED, host(m1), CU_MEMORYTYPE_DEVICE, host(d4));
  ONE(cuMemcpy3DAsync_v2_ptsz, PFN_cuMemcpy3DAsync_v7000_ptsz, &c3, s);          // htod managed
  CHECK(same(host(d4), host(m1), S));
  CUDA_MEMCPY3D_PEER c3p = copy3d<CUDA_MEMCPY3D_PEER>(CU_MEMORYTYPE_DEVICE, host(d1), CU_MEMORYTYPE_DEVICE, host(d5));
  c3p.srcContext = c3p.dstContext = ctx;
  ONE(cuMemcpy3DPeer, PFN_cuMemcpy3DPeer_v4000, &c3p);                           // peer
  ONE(cuMemcpy3DPeer_ptds, PFN_cuMemcpy3DPeer_v7000_ptds, &c3p);                 // peer
  ONE(cuMemcpy3DPeerAsync, PFN_cuMemcpy3DPeerAsync_v4000, &c3p, s);              // peer
  ONE(cuMemcpy3DPeerAsync_ptsz, PFN_cuMemcpy3DPeerAsync_v7000_ptsz, &c3p, s);    // peer
  CHECK(same(host(d5), ref, S));

  // ---- copies to and from CUDA arrays: the stand-in has none. 14 calls, 14 errors.
  const CUresult ns = CUDA_ERROR_NOT_SUPPORTED;
  CUarray arr = nullptr;
  ONE_R(ns, cuMemcpyHtoA_v2, PFN_cuMemcpyHtoA_v3020, arr, 0, hp, S);
  ONE_R(ns, cuMemcpyHtoA_v2_ptds, PFN_cuMemcpyHtoA_v7000_ptds, arr, 0, hp, S);
  ONE_R(ns, cuMemcpyAtoH_v2, PFN_cuMemcpyAtoH_v3020, hp, arr, 0, S);
  ONE_R(ns, cuMemcpyAtoH_v2_ptds, PFN_cuMemcpyAtoH_v7000_ptds, hp, arr, 0, S);
  ONE_R(ns, cuMemcpyDtoA_v2, PFN_cuMemcpyDtoA_v3020, arr, 0, d1, S);
  ONE_R(ns, cuMemcpyDtoA_v2_ptds, PFN_cuMemcpyDtoA_v7000_ptds, arr, 0, d1, S);
  ONE_R(ns, cuMemcpyAtoD_v2, PFN_cuMemcpyAtoD_v3020, d1, arr, 0, S);
  ONE_R(ns, cuMemcpyAtoD_v2_ptds, PFN_cuMemcpyAtoD_v7000_ptds, d1, arr, 0, S);
  ONE_R(ns, cuMemcpyAtoA_v2, PFN_cuMemcpyAtoA_v3020, arr, 0, arr, 0, S);
  ONE_R(ns, cuMemcpyAtoA_v2_ptds, PFN_cuMemcpyAtoA_v7000_ptds, arr, 0, arr, 0, S);
  ONE_R(ns, cuMemcpyHtoAAsync_v2, PFN_cuMemcpyHtoAAsync_v3020, arr, 0, hp, S, s);
  ONE_R(ns, cuMemcpyHtoAAsync_v2_ptsz, PFN_cuMemcpyHtoAAsync_v7000_ptsz, arr, 0, hp, S, s);
  ONE_R(ns, cuMemcpyAtoHAsync_v2, PFN_cuMemcpyAtoHAsync_v3020, hp, arr, 0, S, s);
  ONE_R(ns, cuMemcpyAtoHAsync_v2_ptsz, PFN_cuMemcpyAtoHAsync_v7000_ptsz, hp, arr, 0, S, s);

  // ---- batches
  CUmemcpyAttributes attr = {};
  attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  size_t attr_idx = 0, fail = 0;
  fill(host(d1), S, 9);
  std::memcpy(ref, host(d1), S);
  {
    CUdeviceptr dst[2] = {d3, dev(hp)}, src[2] = {d1, d1};
    size_t sz[2] = {S, S};
    ONE(cuMemcpyBatchAsync, PFN_cuMemcpyBatchAsync_v12080, dst, src, sz, 2, &attr, &attr_idx, 1, &fail, s);  // dtod, dtoh pageable
    CHECK(fail == SIZE_MAX && same(host(d3), ref, S) && same(hp, ref, S));
  }
  {
    fill(h1, S, 10);
    fill(host(m1), S, 11);
    CUdeviceptr dst[2] = {d1, d3}, src[2] = {dev(h1), m1};
    size_t sz[2] = {S, S};
    ONE(cuMemcpyBatchAsync_ptsz, PFN_cuMemcpyBatchAsync_v12080_ptsz, dst, src, sz, 2, &attr, &attr_idx, 1, &fail, s);  // htod pinned, htod managed
    CHECK(same(host(d1), h1, S) && same(host(d3), host(m1), S));
  }
  {
    CUdeviceptr dst[1] = {d4}, src[1] = {d3};
    size_t sz[1] = {S};
    ONE(cuMemcpyBatchAsync_v2, PFN_cuMemcpyBatchAsync_v13000, dst, src, sz, 1, &attr, &attr_idx, 1, s);  // dtod
    CHECK(same(host(d4), host(m1), S));
  }
  {
    fill(h2, S, 12);
    CUdeviceptr dst[1] = {dev(hp)}, src[1] = {dev(h2)};
    size_t sz[1] = {S};
    ONE(cuMemcpyBatchAsync_v2_ptsz, PFN_cuMemcpyBatchAsync_v13000_ptsz, dst, src, sz, 1, &attr, &attr_idx, 1, s);  // htoh, pinned source
    CHECK(same(hp, h2, S));
  }
  {
    CUDA_MEMCPY3D_BATCH_OP op = op3d(d3, d1, S, 1, 1);
    ONE(cuMemcpy3DBatchAsync, PFN_cuMemcpy3DBatchAsync_v12080, 1, &op, &fail, 0ull, s);  // dtod
    CHECK(fail == SIZE_MAX && same(host(d3), h1, S));
    op = op3d(dev(hp), d1, S, 1, 1);
    ONE(cuMemcpy3DBatchAsync_ptsz, PFN_cuMemcpy3DBatchAsync_v12080_ptsz, 1, &op, &fail, 0ull, s);  // dtoh pageable
    CHECK(same(hp, h1, S));
    fill(hp, S, 13);
    op = op3d(d1, dev(hp), S, 1, 1);
    ONE(cuMemcpy3DBatchAsync_v2, PFN_cuMemcpy3DBatchAsync_v13000, 1, &op, 0ull, s);  // htod pageable
    CHECK(same(host(d1), hp, S));
    fill(hp1, S, 14);
    op = op3d(d1, dev(hp1), 256, 4, 4);
    ONE(cuMemcpy3DBatchAsync_v2_ptsz, PFN_cuMemcpy3DBatchAsync_v13000_ptsz, 1, &op, 0ull, s);  // htod pinned (registered)
    CHECK(same(host(d1), hp1, S));
  }

  // ---- memsets: 24 calls of 4 KiB each
  ONE(cuMemsetD8_v2, PFN_cuMemsetD8_v3020, d1, 0x11, S);
  CHECK(all_eq<uint8_t>(d1, S, 0x11));
  ONE(cuMemsetD8_v2_ptds, PFN_cuMemsetD8_v7000_ptds, d1, 0x12, S);
  CHECK(all_eq<uint8_t>(d1, S, 0x12));
  ONE(cuMemsetD16_v2, PFN_cuMemsetD16_v3020, d1, 0x1314, S / 2);
  CHECK(all_eq<uint16_t>(d1, S / 2, 0x1314));
  ONE(cuMemsetD16_v2_ptds, PFN_cuMemsetD16_v7000_ptds, d1, 0x1516, S / 2);
  CHECK(all_eq<uint16_t>(d1, S / 2, 0x1516));
  ONE(cuMemsetD32_v2, PFN_cuMemsetD32_v3020, d1, 0x17181920u, S / 4);
  CHECK(all_eq<uint32_t>(d1, S / 4, 0x17181920u));
  ONE(cuMemsetD32_v2_ptds, PFN_cuMemsetD32_v7000_ptds, d1, 0x21222324u, S / 4);
  CHECK(all_eq<uint32_t>(d1, S / 4, 0x21222324u));
  ONE(cuMemsetD2D8_v2, PFN_cuMemsetD2D8_v3020, d2, pitch, 0x25, 256, 16);
  CHECK(rows_eq<uint8_t>(d2, pitch, 256, 16, 0x25));
  ONE(cuMemsetD2D8_v2_ptds, PFN_cuMemsetD2D8_v7000_ptds, d2, pitch, 0x26, 256, 16);
  CHECK(rows_eq<uint8_t>(d2, pitch, 256, 16, 0x26));
  ONE(cuMemsetD2D16_v2, PFN_cuMemsetD2D16_v3020, d2, pitch, 0x2728, 128, 16);
  CHECK(rows_eq<uint16_t>(d2, pitch, 128, 16, 0x2728));
  ONE(cuMemsetD2D16_v2_ptds, PFN_cuMemsetD2D16_v7000_ptds, d2, pitch, 0x2930, 128, 16);
  CHECK(rows_eq<uint16_t>(d2, pitch, 128, 16, 0x2930));
  ONE(cuMemsetD2D32_v2, PFN_cuMemsetD2D32_v3020, d2, pitch, 0x31323334u, 64, 16);
  CHECK(rows_eq<uint32_t>(d2, pitch, 64, 16, 0x31323334u));
  ONE(cuMemsetD2D32_v2_ptds, PFN_cuMemsetD2D32_v7000_ptds, d2, pitch, 0x35363738u, 64, 16);
  CHECK(rows_eq<uint32_t>(d2, pitch, 64, 16, 0x35363738u));
  ONE(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020, d1, 0x41, S, s);
  CHECK(all_eq<uint8_t>(d1, S, 0x41));
  ONE(cuMemsetD8Async_ptsz, PFN_cuMemsetD8Async_v7000_ptsz, d1, 0x42, S, s);
  CHECK(all_eq<uint8_t>(d1, S, 0x42));
  ONE(cuMemsetD16Async, PFN_cuMemsetD16Async_v3020, d1, 0x4344, S / 2, s);
  CHECK(all_eq<uint16_t>(d1, S / 2, 0x4344));
  ONE(cuMemsetD16Async_ptsz, PFN_cuMemsetD16Async_v7000_ptsz, d1, 0x4546, S / 2, s);
  CHECK(all_eq<uint16_t>(d1, S / 2, 0x4546));
  ONE(cuMemsetD32Async, PFN_cuMemsetD32Async_v3020, d1, 0x47484950u, S / 4, s);
  CHECK(all_eq<uint32_t>(d1, S / 4, 0x47484950u));
  ONE(cuMemsetD32Async_ptsz, PFN_cuMemsetD32Async_v7000_ptsz, d1, 0x51525354u, S / 4, s);
  CHECK(all_eq<uint32_t>(d1, S / 4, 0x51525354u));
  ONE(cuMemsetD2D8Async, PFN_cuMemsetD2D8Async_v3020, d2, pitch, 0x55, 256, 16, s);
  CHECK(rows_eq<uint8_t>(d2, pitch, 256, 16, 0x55));
  ONE(cuMemsetD2D8Async_ptsz, PFN_cuMemsetD2D8Async_v7000_ptsz, d2, pitch, 0x56, 256, 16, s);
  CHECK(rows_eq<uint8_t>(d2, pitch, 256, 16, 0x56));
  ONE(cuMemsetD2D16Async, PFN_cuMemsetD2D16Async_v3020, d2, pitch, 0x5758, 128, 16, s);
  CHECK(rows_eq<uint16_t>(d2, pitch, 128, 16, 0x5758));
  ONE(cuMemsetD2D16Async_ptsz, PFN_cuMemsetD2D16Async_v7000_ptsz, d2, pitch, 0x5960, 128, 16, s);
  CHECK(rows_eq<uint16_t>(d2, pitch, 128, 16, 0x5960));
  ONE(cuMemsetD2D32Async, PFN_cuMemsetD2D32Async_v3020, d2, pitch, 0x61626364u, 64, 16, s);
  CHECK(rows_eq<uint32_t>(d2, pitch, 64, 16, 0x61626364u));
  ONE(cuMemsetD2D32Async_ptsz, PFN_cuMemsetD2D32Async_v7000_ptsz, d2, pitch, 0x65666768u, 64, 16, s);
  CHECK(rows_eq<uint32_t>(d2, pitch, 64, 16, 0x65666768u));

  // ---- unified-memory hints on m1: prefetch 4 x S, advise 2 x S
  CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  ONE(cuMemPrefetchAsync, PFN_cuMemPrefetchAsync_v8000, m1, S, 0, s);
  ONE(cuMemPrefetchAsync_ptsz, PFN_cuMemPrefetchAsync_v8000_ptsz, m1, S, 0, s);
  ONE(cuMemPrefetchAsync_v2, PFN_cuMemPrefetchAsync_v12020, m1, S, loc, 0u, s);
  ONE(cuMemPrefetchAsync_v2_ptsz, PFN_cuMemPrefetchAsync_v12020_ptsz, m1, S, loc, 0u, s);
  ONE(cuMemAdvise, PFN_cuMemAdvise_v8000, m1, S, CU_MEM_ADVISE_SET_READ_MOSTLY, 0);
  ONE(cuMemAdvise_v2, PFN_cuMemAdvise_v12020, m1, S, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc);

  // ---- initialisation (again: the driver takes it any number of times)
  ONE(cuInit, PFN_cuInit_v2000, 0u);

  // ---- synchronisations
  ONE(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000);
  ONE(cuCtxSynchronize_v2, PFN_cuCtxSynchronize_v13000, ctx);
  ONE(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000, s);
  ONE(cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz, s);
  CUevent ev = nullptr;
  CK(get<PFN_cuEventCreate_v2000>("cuEventCreate")(&ev, 0u));
  CK(get<PFN_cuEventRecord_v2000>("cuEventRecord")(ev, s));
  ONE(cuEventSynchronize, PFN_cuEventSynchronize_v2000, ev);

  // ---- launches: 2 of each kind
  CUdeviceptr counter = d6;
  *preload::dev_ptr<uint32_t>(counter) = 0;
  void* params[] = {&counter};
  CUfunction f = preload::as_function(k_count);
  CUlaunchConfig cfg = {};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = s;
  ONE(cuLaunchKernel, PFN_cuLaunchKernel_v4000, f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
  ONE(cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz, f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
  ONE(cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060, &cfg, f, params, nullptr);
  ONE(cuLaunchKernelEx_ptsz, PFN_cuLaunchKernelEx_v11060_ptsz, &cfg, f, params, nullptr);
  ONE(cuLaunchCooperativeKernel, PFN_cuLaunchCooperativeKernel_v9000, f, 1, 1, 1, 1, 1, 1, 0, s, params);
  ONE(cuLaunchCooperativeKernel_ptsz, PFN_cuLaunchCooperativeKernel_v9000_ptsz, f, 1, 1, 1, 1, 1, 1, 0, s, params);
  CHECK(*preload::dev_ptr<uint32_t>(counter) == 6 && g_kernel_hits == 6);
  CUgraphExec graph = reinterpret_cast<CUgraphExec>(&g_kernel_hits);  // any handle: graphs just succeed
  ONE(cuGraphLaunch, PFN_cuGraphLaunch_v10000, graph, s);
  ONE(cuGraphLaunch_ptsz, PFN_cuGraphLaunch_v10000_ptsz, graph, s);
  // ---- stream memory operations: writes of one word; waits the stand-in refuses (it takes only an
  // equality wait on pinned memory, which the shim's own gate uses); batches
  ONE(cuStreamWriteValue32, PFN_cuStreamWriteValue32_v8000, s, counter, 0x51525354u, 0u);
  CHECK(*preload::dev_ptr<uint32_t>(counter) == 0x51525354u);
  ONE(cuStreamWriteValue32_ptsz, PFN_cuStreamWriteValue32_v8000_ptsz, s, counter, 0x55565758u, 0u);
  CHECK(*preload::dev_ptr<uint32_t>(counter) == 0x55565758u);
  ONE(cuStreamWriteValue64, PFN_cuStreamWriteValue64_v9000, s, counter, 0x2122232425262728ull, 0u);
  CHECK(*preload::dev_ptr<uint64_t>(counter) == 0x2122232425262728ull);
  ONE(cuStreamWriteValue64_ptsz, PFN_cuStreamWriteValue64_v9000_ptsz, s, counter, 0x3132333435363738ull, 0u);
  CHECK(*preload::dev_ptr<uint64_t>(counter) == 0x3132333435363738ull);
  ONE(cuStreamWaitValue32, PFN_cuStreamWaitValue32_v8000, s, counter, 0u, 0u);
  ONE(cuStreamWaitValue32_ptsz, PFN_cuStreamWaitValue32_v8000_ptsz, s, counter, 0u, 0u);
  ONE(cuStreamWaitValue64, PFN_cuStreamWaitValue64_v9000, s, counter, 0ull, 0u);
  ONE(cuStreamWaitValue64_ptsz, PFN_cuStreamWaitValue64_v9000_ptsz, s, counter, 0ull, 0u);
  ONE(cuStreamBatchMemOp, PFN_cuStreamBatchMemOp_v8000, s, 0u, nullptr, 0u);
  ONE(cuStreamBatchMemOp_ptsz, PFN_cuStreamBatchMemOp_v8000_ptsz, s, 0u, nullptr, 0u);
  ONE(cuStreamWriteValue32_v2, PFN_cuStreamWriteValue32_v11070, s, counter, 0x71727374u, 0u);
  CHECK(*preload::dev_ptr<uint32_t>(counter) == 0x71727374u);
  ONE(cuStreamWriteValue32_v2_ptsz, PFN_cuStreamWriteValue32_v11070_ptsz, s, counter, 0x75767778u, 0u);
  CHECK(*preload::dev_ptr<uint32_t>(counter) == 0x75767778u);
  ONE(cuStreamWriteValue64_v2, PFN_cuStreamWriteValue64_v11070, s, counter, 0x0102030405060708ull, 0u);
  CHECK(*preload::dev_ptr<uint64_t>(counter) == 0x0102030405060708ull);
  ONE(cuStreamWriteValue64_v2_ptsz, PFN_cuStreamWriteValue64_v11070_ptsz, s, counter, 0x1112131415161718ull, 0u);
  CHECK(*preload::dev_ptr<uint64_t>(counter) == 0x1112131415161718ull);
  ONE_R(CUDA_ERROR_INVALID_VALUE, cuStreamWaitValue32_v2, PFN_cuStreamWaitValue32_v11070, s, counter, 0u, CU_STREAM_WAIT_VALUE_GEQ);
  ONE_R(CUDA_ERROR_INVALID_VALUE, cuStreamWaitValue32_v2_ptsz, PFN_cuStreamWaitValue32_v11070_ptsz, s, counter, 0u, CU_STREAM_WAIT_VALUE_GEQ);
  ONE(cuStreamWaitValue64_v2, PFN_cuStreamWaitValue64_v11070, s, counter, 0ull, 0u);
  ONE(cuStreamWaitValue64_v2_ptsz, PFN_cuStreamWaitValue64_v11070_ptsz, s, counter, 0ull, 0u);
  ONE(cuStreamBatchMemOp_v2, PFN_cuStreamBatchMemOp_v11070, s, 0u, nullptr, 0u);
  ONE(cuStreamBatchMemOp_v2_ptsz, PFN_cuStreamBatchMemOp_v11070_ptsz, s, 0u, nullptr, 0u);
  CUDA_RESOURCE_DESC res = {};
  res.resType = CU_RESOURCE_TYPE_LINEAR;
  res.res.linear.devPtr = d1;
  res.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
  res.res.linear.numChannels = 1;
  res.res.linear.sizeInBytes = S;
  CUDA_TEXTURE_DESC tex_desc = {};
  CUtexObject tex = 0;
  ONE(cuTexObjectCreate, PFN_cuTexObjectCreate_v5000, &tex, &res, &tex_desc, nullptr);
  CHECK(tex != 0);
  ONE(cuTexObjectDestroy, PFN_cuTexObjectDestroy_v5000, tex);

  // ---- the lookups themselves, through the pointers the driver hands out for them
  void* p = nullptr;
  CUdriverProcAddressQueryResult st;
  ONE(cuGetProcAddress, PFN_cuGetProcAddress_v11030, "cuMemAlloc", &p, 3020, 0ull);
  CHECK(p == dlsym(g_lib, "cuMemAlloc_v2"));
  ONE(cuGetProcAddress_v2, PFN_cuGetProcAddress_v12000, "cuMemcpyHtoD", &p, 3020, 2ull, &st);
  CHECK(p == dlsym(g_lib, "cuMemcpyHtoD_v2_ptds"));

  // ---- frees: VMM, registrations, pinned, stream-ordered, plain
  ONE(cuMemUnmap, PFN_cuMemUnmap_v10020, va, kVmm);
  ONE(cuMemRelease, PFN_cuMemRelease_v10020, hdl);
  CK(get<PFN_cuMemAddressFree_v10020>("cuMemAddressFree")(va, kVmm));
  ONE(cuMemHostUnregister, PFN_cuMemHostUnregister_v4000, hp1);
  ONE(cuMemHostUnregister, PFN_cuMemHostUnregister_v4000, hp2);
  ONE(cuMemFreeHost, PFN_cuMemFreeHost_v2000, h1);
  ONE(cuMemFreeHost, PFN_cuMemFreeHost_v2000, h2);
  ONE(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020, d3, s);
  ONE(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020_ptsz, d4, s);
  ONE(cuMemFree_v2, PFN_cuMemFree_v3020, d1);
  ONE(cuMemFree_v2, PFN_cuMemFree_v3020, d2);
  ONE(cuMemFree_v2, PFN_cuMemFree_v3020, m1);
  ONE(cuMemFree_v2, PFN_cuMemFree_v3020, d5);
  ONE(cuMemFree_v2, PFN_cuMemFree_v3020, d6);
  std::free(hp);
  std::free(hp1);
  std::free(hp2);
  std::free(ref);

  for (const char* h : kHooked) {
    if (!g_called.count(h)) {
      std::fprintf(stderr, "every_hook did not call %s\n", h);
      std::exit(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  g_shim = preload::has_arg(argc, argv, "--shim");
  g_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(g_lib);
  g_calls = reinterpret_cast<fake_cuda_calls_fn>(dlsym(g_lib, "fake_cuda_calls"));
  g_gpa2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(g_lib, "cuGetProcAddress_v2"));
  g_gpa1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(g_lib, "cuGetProcAddress"));
  CHECK(g_calls && g_gpa2 && g_gpa1);
  preload::check_hooked(reinterpret_cast<void*>(g_gpa2), g_shim, "cuGetProcAddress_v2");
  preload::check_hooked(reinterpret_cast<void*>(g_gpa1), g_shim, "cuGetProcAddress");
  void* self = nullptr;
  CUdriverProcAddressQueryResult st;
  CK(g_gpa2("cuGetProcAddress", &self, 12000, 0, &st));
  CHECK(self == reinterpret_cast<void*>(g_gpa2));
  g_gpa2_self = reinterpret_cast<PFN_cuGetProcAddress_v12000>(self);

  spot_checks();
  int swept = sweep();

  // The standard workload through looked-up pointers: default stream, then per-thread.
  for (bool per_thread : {false, true}) {
    preload::Api api;
    preload::fill_api_from_proc(&api, g_gpa2, 12000, per_thread, g_shim);
    preload::run_workload_checked(api, 64 * 1024, g_calls, per_thread);
  }

  CUcontext ctx = nullptr;
  CK(get<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent")(&ctx));
  CHECK(ctx);
  CUstream s = nullptr;
  CK(get<PFN_cuStreamCreate_v2000>("cuStreamCreate")(&s, 0));
  every_hook(ctx, s);
  CK(get<PFN_cuStreamDestroy_v4000>("cuStreamDestroy_v2")(s));

  std::printf("procaddr: ok (%d lookups swept, %zu hooked implementations called)\n", swept, g_called.size());
  return 0;
}
