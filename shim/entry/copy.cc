// Copy and memset entry points: every direction, sync and async, 2D/3D/peer/batch, and the
// per-thread-default-stream variants of each.
#include <optional>

#include "act/census.h"
#include "act/copy.h"
#include "act/placement.h"
#include "act/residency.h"
#include "act/tables.h"
#include "common.h"
#include "trace/trace.h"

namespace gms::entry {

observe::PtrKind ask_driver(uintptr_t p) {
  unsigned int type = 0;
  if (call_real(GMS_REAL(cuPointerGetAttribute), &type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, static_cast<CUdeviceptr>(p)) !=
      CUDA_SUCCESS) {
    return observe::PtrKind::pageable;  // the driver does not know it: ordinary host memory
  }
  if (type == CU_MEMORYTYPE_HOST) return observe::PtrKind::pinned;
  int managed = 0;
  if (call_real(GMS_REAL(cuPointerGetAttribute), &managed, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                static_cast<CUdeviceptr>(p)) == CUDA_SUCCESS && managed) {
    return observe::PtrKind::managed;
  }
  return observe::PtrKind::device;
}

namespace {

using observe::CopyEnd;
using observe::Side;

CopyEnd host(const void* p) { return {Side::host, addr(p)}; }
CopyEnd dev(CUdeviceptr p) { return {Side::device, addr(p)}; }
CopyEnd unified(CUdeviceptr p) { return {Side::unified, addr(p)}; }
CopyEnd array() { return {Side::array, 0}; }

CopyEnd end_of(CUmemorytype type, const void* host_ptr, CUdeviceptr dev_ptr) {
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      return host(host_ptr);
    case CU_MEMORYTYPE_DEVICE:
      return dev(dev_ptr);
    case CU_MEMORYTYPE_ARRAY:
      return array();
    default:
      return unified(dev_ptr);
  }
}

void linear_copy(CUresult r, CopyEnd dst, CopyEnd src, uint64_t bytes, bool peer) {
  observe::copy_call(ok(r), bytes);
  if (ok(r)) observe::copy_one(dst, src, bytes, peer, ask_driver);
}

// A copy between the host and a device: pageable host memory goes through act/copy (registered,
// staged, or the driver's way); everything else is the program's call unchanged.
// `host_kind`: the host end, already classified by the caller, or unknown (typed copies).
template <typename F>
CUresult host_device_copy(act::HostCopyDir dir, const void* host_ptr, CUdeviceptr dev_ptr, size_t n, CUstream st,
                          bool async, bool per_thread, F&& real,
                          std::optional<observe::PtrKind> host_kind = std::nullopt) {
  observe::PtrKind hk = host_kind ? *host_kind : observe::classify(host(host_ptr), nullptr);
  CUresult r;
  bool host_memory = hk == observe::PtrKind::pageable || hk == observe::PtrKind::pinned;
  if (host_memory && act::copy_host_placed(dir, const_cast<void*>(host_ptr), dev_ptr, n, st, async, per_thread, &r)) {
    // done by host threads: the device end is memory the shim placed on the host
  } else if (hk == observe::PtrKind::pageable) {
    act::HostCopy c{dir, const_cast<void*>(host_ptr), dev_ptr, n, st, async, per_thread};
    r = act::copy_pageable(c, act::invoke<F>, &real);
  } else {
    r = real();
  }
  observe::copy_call(ok(r), n);
  if (ok(r) && dir == act::HostCopyDir::htod) act::tables::host_wrote(addr(dev_ptr), host_ptr, n);
  if (ok(r)) {
    bool in = dir == act::HostCopyDir::htod;
    observe::copy_classified(in ? observe::PtrKind::device : hk, in ? hk : observe::PtrKind::device, n, false);
  }
  return r;
}

// cuMemcpy and cuMemcpyAsync name no direction: when one side is pageable host memory and the
// other device memory, it is a host-device copy like any other.
template <typename F>
CUresult unified_copy(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st, bool async, bool per_thread, F&& real) {
  observe::PtrKind dk = observe::classify(unified(d), ask_driver);
  observe::PtrKind sk = observe::classify(unified(s), ask_driver);
  if (sk == observe::PtrKind::pageable && dk == observe::PtrKind::device) {
    return host_device_copy(act::HostCopyDir::htod, reinterpret_cast<const void*>(s), d, n, st, async, per_thread,
                            real, sk);
  }
  if (dk == observe::PtrKind::pageable && sk == observe::PtrKind::device) {
    return host_device_copy(act::HostCopyDir::dtoh, reinterpret_cast<const void*>(d), s, n, st, async, per_thread,
                            real, dk);
  }
  // Between ordinary host memory and memory the shim placed on the host (spilled).
  CUresult placed;
  if ((sk == observe::PtrKind::pageable &&
       act::copy_host_placed(act::HostCopyDir::htod, reinterpret_cast<void*>(s), d, n, st, async, per_thread, &placed)) ||
      (dk == observe::PtrKind::pageable &&
       act::copy_host_placed(act::HostCopyDir::dtoh, reinterpret_cast<void*>(d), s, n, st, async, per_thread, &placed))) {
    observe::copy_call(ok(placed), n);
    if (ok(placed)) observe::copy_classified(dk, sk, n, false);
    return placed;
  }
  CUresult r = real();
  observe::copy_call(ok(r), n);
  if (ok(r)) observe::copy_classified(dk, sk, n, false);
  // (A pinned source here may be memory the shim placed, whose device address is not its host one:
  // not read. Pinned sources named as host pointers are, in host_device_copy.)
  if (ok(r) && dk == observe::PtrKind::device && sk == observe::PtrKind::device) {
    act::tables::device_copied(addr(d), addr(s), n);
  }
  return r;
}

// A device-to-device copy: counted, and what it carries of pointer tables (act/tables.h).
void device_copy(CUresult r, CUdeviceptr d, CUdeviceptr s, size_t n) {
  linear_copy(r, dev(d), dev(s), n, false);
  if (ok(r)) act::tables::device_copied(addr(d), addr(s), n);
}

// A memset of `bytes`: counted; a pointer table there holds no addresses any more.
void memset_done(CUresult r, CUdeviceptr d, uint64_t bytes) {
  observe::call(Family::memset, ok(r), bytes);
  if (ok(r)) act::tables::cleared(addr(d), bytes);
}

void copy_2d(CUresult r, const CUDA_MEMCPY2D* c) {
  uint64_t bytes = c ? static_cast<uint64_t>(c->WidthInBytes) * c->Height : 0;
  if (!c) return observe::copy_call(false, 0);
  linear_copy(r, end_of(c->dstMemoryType, c->dstHost, c->dstDevice), end_of(c->srcMemoryType, c->srcHost, c->srcDevice),
              bytes, false);
}

template <typename C>
void copy_3d(CUresult r, const C* c, bool peer) {
  if (!c) return observe::copy_call(false, 0);
  uint64_t bytes = static_cast<uint64_t>(c->WidthInBytes) * c->Height * (c->Depth ? c->Depth : 1);
  linear_copy(r, end_of(c->dstMemoryType, c->dstHost, c->dstDevice), end_of(c->srcMemoryType, c->srcHost, c->srcDevice),
              bytes, peer);
}

void copy_batch(CUresult r, const CUdeviceptr* dsts, const CUdeviceptr* srcs, const size_t* sizes, size_t count) {
  uint64_t total = 0;
  if (sizes) {
    for (size_t i = 0; i < count; ++i) total += sizes[i];
  }
  observe::copy_call(ok(r), total);
  if (!ok(r) || !dsts || !srcs || !sizes) return;
  for (size_t i = 0; i < count; ++i) observe::copy_one(unified(dsts[i]), unified(srcs[i]), sizes[i], false, ask_driver);
}

CopyEnd operand_end(const CUmemcpy3DOperand& o) {
  return o.type == CU_MEMCPY_OPERAND_TYPE_POINTER ? unified(o.op.ptr.ptr) : array();
}

void copy_3d_batch(CUresult r, size_t n, const CUDA_MEMCPY3D_BATCH_OP* ops) {
  uint64_t total = 0;
  auto bytes_of = [](const CUDA_MEMCPY3D_BATCH_OP& op) {
    return static_cast<uint64_t>(op.extent.width) * (op.extent.height ? op.extent.height : 1) *
           (op.extent.depth ? op.extent.depth : 1);
  };
  if (ops) {
    for (size_t i = 0; i < n; ++i) total += bytes_of(ops[i]);
  }
  observe::copy_call(ok(r), total);
  if (!ok(r) || !ops) return;
  for (size_t i = 0; i < n; ++i) {
    observe::copy_one(operand_end(ops[i].dst), operand_end(ops[i].src), bytes_of(ops[i]), false, ask_driver);
  }
}

}  // namespace
}  // namespace gms::entry

using namespace gms;
using namespace gms::entry;

#define GMS_UNPAREN(...) __VA_ARGS__
// One hook: forward under the guard inside SCOPE (the residency planner's view of the call), then
// record the copy described by RECORD.
#define GMS_SCOPED_HOOK(sym, params, args, SCOPE, RECORD)       \
  GMS_EXPORT CUresult sym params {                               \
    GMS_NESTED(sym, GMS_UNPAREN args);                           \
    ::gms::trace::CopyScope trace_copy(#sym);                    \
    SCOPE;                                                       \
    CUresult r = call_real(GMS_REAL(sym), GMS_UNPAREN args);     \
    RECORD;                                                      \
    return r;                                                    \
  }
// Its memory is not planned or marked (act::UnscannedScope): under scan order it waits for the
// moves' copies, and the next round of moves waits for the context.
#define GMS_COPY_HOOK(sym, params, args, RECORD) \
  GMS_SCOPED_HOOK(sym, params, args, ::gms::act::UnscannedScope unscanned, RECORD)
// One whose device ends and stream are known (USES, for act::TransferScope).
#define GMS_USES_HOOK(sym, params, args, USES, RECORD) \
  GMS_SCOPED_HOOK(sym, params, args, ::gms::act::TransferScope uses USES, RECORD)

// Host-device copies, synchronous (legacy or per-thread default stream) and asynchronous, through
// host_device_copy; device-to-device ones straight through.
// USES: the device ends and the stream, for act::TransferScope.
#define GMS_HOST_HOOK(sym, params, args, USES, CALL)             \
  GMS_EXPORT CUresult sym params {                               \
    GMS_NESTED(sym, GMS_UNPAREN args);                           \
    ::gms::trace::CopyScope trace_copy(#sym);                    \
    ::gms::act::TransferScope uses USES;                         \
    return CALL;                                                 \
  }
#define GMS_REAL_CALL(sym, args) [&] { return call_real(GMS_REAL(sym), GMS_UNPAREN args); }
// A synchronous copy waits for the work before it on its stream: a program may touch managed
// memory after it as after a synchronisation (act/census.h).
#define GMS_SYNCED(CALL) [&] { const CUresult r_ = CALL; if (r_ == CUDA_SUCCESS) act::census_synchronized(); return r_; }()
#define GMS_HTOD(sym, PT) GMS_HOST_HOOK(sym, (CUdeviceptr d, const void* s, size_t n), (d, s, n), (addr(d), 0, nullptr, PT), \
  GMS_SYNCED(host_device_copy(act::HostCopyDir::htod, s, d, n, nullptr, false, PT, GMS_REAL_CALL(sym, (d, s, n)))))
#define GMS_DTOH(sym, PT) GMS_HOST_HOOK(sym, (void* d, CUdeviceptr s, size_t n), (d, s, n), (addr(s), 0, nullptr, PT), \
  GMS_SYNCED(host_device_copy(act::HostCopyDir::dtoh, d, s, n, nullptr, false, PT, GMS_REAL_CALL(sym, (d, s, n)))))
#define GMS_HTOD_A(sym, PT) GMS_HOST_HOOK(sym, (CUdeviceptr d, const void* s, size_t n, CUstream st), (d, s, n, st), (addr(d), 0, st, PT), \
  host_device_copy(act::HostCopyDir::htod, s, d, n, st, true, PT, GMS_REAL_CALL(sym, (d, s, n, st))))
#define GMS_DTOH_A(sym, PT) GMS_HOST_HOOK(sym, (void* d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), (addr(s), 0, st, PT), \
  host_device_copy(act::HostCopyDir::dtoh, d, s, n, st, true, PT, GMS_REAL_CALL(sym, (d, s, n, st))))
#define GMS_ANY(sym, PT) GMS_HOST_HOOK(sym, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), (addr(d), addr(s), nullptr, PT), \
  GMS_SYNCED(unified_copy(d, s, n, nullptr, false, PT, GMS_REAL_CALL(sym, (d, s, n)))))
#define GMS_ANY_A(sym, PT) GMS_HOST_HOOK(sym, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), (addr(d), addr(s), st, PT), \
  unified_copy(d, s, n, st, true, PT, GMS_REAL_CALL(sym, (d, s, n, st))))
#define GMS_DTOD(sym, PT) GMS_USES_HOOK(sym, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), (addr(d), addr(s), nullptr, PT), device_copy(r, d, s, n))
#define GMS_DTOD_A(sym, PT) GMS_USES_HOOK(sym, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), (addr(d), addr(s), st, PT), device_copy(r, d, s, n))
GMS_HTOD(cuMemcpyHtoD_v2, false)
GMS_HTOD(cuMemcpyHtoD_v2_ptds, true)
GMS_DTOH(cuMemcpyDtoH_v2, false)
GMS_DTOH(cuMemcpyDtoH_v2_ptds, true)
GMS_DTOD(cuMemcpyDtoD_v2, false)
GMS_DTOD(cuMemcpyDtoD_v2_ptds, true)
GMS_ANY(cuMemcpy, false)
GMS_ANY(cuMemcpy_ptds, true)
GMS_HTOD_A(cuMemcpyHtoDAsync_v2, false)
GMS_HTOD_A(cuMemcpyHtoDAsync_v2_ptsz, true)
GMS_DTOH_A(cuMemcpyDtoHAsync_v2, false)
GMS_DTOH_A(cuMemcpyDtoHAsync_v2_ptsz, true)
GMS_DTOD_A(cuMemcpyDtoDAsync_v2, false)
GMS_DTOD_A(cuMemcpyDtoDAsync_v2_ptsz, true)
GMS_ANY_A(cuMemcpyAsync, false)
GMS_ANY_A(cuMemcpyAsync_ptsz, true)

#define GMS_PEER(sym) GMS_COPY_HOOK(sym, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n), (d, dc, s, sc, n), linear_copy(r, dev(d), dev(s), n, true))
#define GMS_PEER_A(sym) GMS_COPY_HOOK(sym, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st), (d, dc, s, sc, n, st), linear_copy(r, dev(d), dev(s), n, true))
GMS_PEER(cuMemcpyPeer)
GMS_PEER(cuMemcpyPeer_ptds)
GMS_PEER_A(cuMemcpyPeerAsync)
GMS_PEER_A(cuMemcpyPeerAsync_ptsz)

// CUDA arrays: the array side is device memory.
#define GMS_HTOA(sym) GMS_COPY_HOOK(sym, (CUarray a, size_t o, const void* s, size_t n), (a, o, s, n), linear_copy(r, array(), host(s), n, false))
#define GMS_ATOH(sym) GMS_COPY_HOOK(sym, (void* d, CUarray a, size_t o, size_t n), (d, a, o, n), linear_copy(r, host(d), array(), n, false))
#define GMS_DTOA(sym) GMS_COPY_HOOK(sym, (CUarray a, size_t o, CUdeviceptr s, size_t n), (a, o, s, n), linear_copy(r, array(), dev(s), n, false))
#define GMS_ATOD(sym) GMS_COPY_HOOK(sym, (CUdeviceptr d, CUarray a, size_t o, size_t n), (d, a, o, n), linear_copy(r, dev(d), array(), n, false))
#define GMS_ATOA(sym) GMS_COPY_HOOK(sym, (CUarray d, size_t doff, CUarray s, size_t soff, size_t n), (d, doff, s, soff, n), linear_copy(r, array(), array(), n, false))
#define GMS_HTOA_A(sym) GMS_COPY_HOOK(sym, (CUarray a, size_t o, const void* s, size_t n, CUstream st), (a, o, s, n, st), linear_copy(r, array(), host(s), n, false))
#define GMS_ATOH_A(sym) GMS_COPY_HOOK(sym, (void* d, CUarray a, size_t o, size_t n, CUstream st), (d, a, o, n, st), linear_copy(r, host(d), array(), n, false))
GMS_HTOA(cuMemcpyHtoA_v2)
GMS_HTOA(cuMemcpyHtoA_v2_ptds)
GMS_ATOH(cuMemcpyAtoH_v2)
GMS_ATOH(cuMemcpyAtoH_v2_ptds)
GMS_DTOA(cuMemcpyDtoA_v2)
GMS_DTOA(cuMemcpyDtoA_v2_ptds)
GMS_ATOD(cuMemcpyAtoD_v2)
GMS_ATOD(cuMemcpyAtoD_v2_ptds)
GMS_ATOA(cuMemcpyAtoA_v2)
GMS_ATOA(cuMemcpyAtoA_v2_ptds)
GMS_HTOA_A(cuMemcpyHtoAAsync_v2)
GMS_HTOA_A(cuMemcpyHtoAAsync_v2_ptsz)
GMS_ATOH_A(cuMemcpyAtoHAsync_v2)
GMS_ATOH_A(cuMemcpyAtoHAsync_v2_ptsz)

// Strided copies: the descriptor says where each side lives.
#define GMS_2D(sym) GMS_COPY_HOOK(sym, (const CUDA_MEMCPY2D* c), (c), copy_2d(r, c))
#define GMS_2D_A(sym) GMS_COPY_HOOK(sym, (const CUDA_MEMCPY2D* c, CUstream st), (c, st), copy_2d(r, c))
#define GMS_3D(sym) GMS_COPY_HOOK(sym, (const CUDA_MEMCPY3D* c), (c), copy_3d(r, c, false))
#define GMS_3D_A(sym) GMS_COPY_HOOK(sym, (const CUDA_MEMCPY3D* c, CUstream st), (c, st), copy_3d(r, c, false))
#define GMS_3DP(sym) GMS_COPY_HOOK(sym, (const CUDA_MEMCPY3D_PEER* c), (c), copy_3d(r, c, true))
#define GMS_3DP_A(sym) GMS_COPY_HOOK(sym, (const CUDA_MEMCPY3D_PEER* c, CUstream st), (c, st), copy_3d(r, c, true))
GMS_2D(cuMemcpy2D_v2)
GMS_2D(cuMemcpy2D_v2_ptds)
GMS_2D(cuMemcpy2DUnaligned_v2)
GMS_2D(cuMemcpy2DUnaligned_v2_ptds)
GMS_2D_A(cuMemcpy2DAsync_v2)
GMS_2D_A(cuMemcpy2DAsync_v2_ptsz)
GMS_3D(cuMemcpy3D_v2)
GMS_3D(cuMemcpy3D_v2_ptds)
GMS_3D_A(cuMemcpy3DAsync_v2)
GMS_3D_A(cuMemcpy3DAsync_v2_ptsz)
GMS_3DP(cuMemcpy3DPeer)
GMS_3DP(cuMemcpy3DPeer_ptds)
GMS_3DP_A(cuMemcpy3DPeerAsync)
GMS_3DP_A(cuMemcpy3DPeerAsync_ptsz)

// Batches: CUDA 12.8's form has a failIdx out-parameter, CUDA 13.0's (_v2) does not.
#define GMS_BATCH_128(sym)                                                                                        \
  GMS_COPY_HOOK(sym,                                                                                              \
                (CUdeviceptr * d, CUdeviceptr * s, size_t * n, size_t count, CUmemcpyAttributes * attrs,          \
                 size_t * attr_idx, size_t num_attrs, size_t * fail, CUstream st),                                \
                (d, s, n, count, attrs, attr_idx, num_attrs, fail, st), copy_batch(r, d, s, n, count))
#define GMS_BATCH_130(sym)                                                                                        \
  GMS_COPY_HOOK(sym,                                                                                              \
                (CUdeviceptr * d, CUdeviceptr * s, size_t * n, size_t count, CUmemcpyAttributes * attrs,          \
                 size_t * attr_idx, size_t num_attrs, CUstream st),                                               \
                (d, s, n, count, attrs, attr_idx, num_attrs, st), copy_batch(r, d, s, n, count))
#define GMS_BATCH3D_128(sym)                                                                                       \
  GMS_COPY_HOOK(sym, (size_t n, CUDA_MEMCPY3D_BATCH_OP * ops, size_t * fail, unsigned long long flags, CUstream st), \
                (n, ops, fail, flags, st), copy_3d_batch(r, n, ops))
#define GMS_BATCH3D_130(sym)                                                                          \
  GMS_COPY_HOOK(sym, (size_t n, CUDA_MEMCPY3D_BATCH_OP * ops, unsigned long long flags, CUstream st), \
                (n, ops, flags, st), copy_3d_batch(r, n, ops))
GMS_BATCH_128(cuMemcpyBatchAsync)
GMS_BATCH_128(cuMemcpyBatchAsync_ptsz)
GMS_BATCH_130(cuMemcpyBatchAsync_v2)
GMS_BATCH_130(cuMemcpyBatchAsync_v2_ptsz)
GMS_BATCH3D_128(cuMemcpy3DBatchAsync)
GMS_BATCH3D_128(cuMemcpy3DBatchAsync_ptsz)
GMS_BATCH3D_130(cuMemcpy3DBatchAsync_v2)
GMS_BATCH3D_130(cuMemcpy3DBatchAsync_v2_ptsz)

// Memsets: counted by the bytes they write.
#define GMS_MEMSET(sym, T, W, PT)                                                                               \
  GMS_USES_HOOK(sym, (CUdeviceptr d, T v, size_t n), (d, v, n), (addr(d), 0, nullptr, PT),                      \
                memset_done(r, d, n * (W)))
#define GMS_MEMSET_A(sym, T, W, PT)                                                                                 \
  GMS_USES_HOOK(sym, (CUdeviceptr d, T v, size_t n, CUstream st), (d, v, n, st), (addr(d), 0, st, PT),             \
                memset_done(r, d, n * (W)))
#define GMS_MEMSET2D(sym, T, W, PT)                                                                        \
  GMS_USES_HOOK(sym, (CUdeviceptr d, size_t pitch, T v, size_t w, size_t h), (d, pitch, v, w, h),          \
                (addr(d), 0, nullptr, PT), observe::call(Family::memset, ok(r), w * (W) * h))
#define GMS_MEMSET2D_A(sym, T, W, PT)                                                                              \
  GMS_USES_HOOK(sym, (CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream st), (d, pitch, v, w, h, st), \
                (addr(d), 0, st, PT), observe::call(Family::memset, ok(r), w * (W) * h))
GMS_MEMSET(cuMemsetD8_v2, unsigned char, 1, false)
GMS_MEMSET(cuMemsetD8_v2_ptds, unsigned char, 1, true)
GMS_MEMSET(cuMemsetD16_v2, unsigned short, 2, false)
GMS_MEMSET(cuMemsetD16_v2_ptds, unsigned short, 2, true)
GMS_MEMSET(cuMemsetD32_v2, unsigned int, 4, false)
GMS_MEMSET(cuMemsetD32_v2_ptds, unsigned int, 4, true)
GMS_MEMSET2D(cuMemsetD2D8_v2, unsigned char, 1, false)
GMS_MEMSET2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
GMS_MEMSET2D(cuMemsetD2D16_v2, unsigned short, 2, false)
GMS_MEMSET2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
GMS_MEMSET2D(cuMemsetD2D32_v2, unsigned int, 4, false)
GMS_MEMSET2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, true)
GMS_MEMSET_A(cuMemsetD8Async, unsigned char, 1, false)
GMS_MEMSET_A(cuMemsetD8Async_ptsz, unsigned char, 1, true)
GMS_MEMSET_A(cuMemsetD16Async, unsigned short, 2, false)
GMS_MEMSET_A(cuMemsetD16Async_ptsz, unsigned short, 2, true)
GMS_MEMSET_A(cuMemsetD32Async, unsigned int, 4, false)
GMS_MEMSET_A(cuMemsetD32Async_ptsz, unsigned int, 4, true)
GMS_MEMSET2D_A(cuMemsetD2D8Async, unsigned char, 1, false)
GMS_MEMSET2D_A(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
GMS_MEMSET2D_A(cuMemsetD2D16Async, unsigned short, 2, false)
GMS_MEMSET2D_A(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
GMS_MEMSET2D_A(cuMemsetD2D32Async, unsigned int, 4, false)
GMS_MEMSET2D_A(cuMemsetD2D32Async_ptsz, unsigned int, 4, true)
