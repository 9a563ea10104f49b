// The stand-in driver's copies and memsets, synchronous but for the async copies it holds back
// (fake_cuda_set_defer), as a GPU's copy engine runs them later.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fake_internal.h"

using namespace fake_internal;

// ---- held-back copies (fake_cuda_set_defer) ------------------------------------------------------
// A GPU's copy engine reads or writes pinned memory when it gets to the copy, not when the call
// returns. With deferral on, async copies whose host side is pinned or registered wait here until
// the program may rely on them: a synchronisation of a stream or the context, of an event recorded
// after them, or any other copy, memset or launch (stream order, kept conservatively: one queue).
// An interposer that returns from a pageable copy before the copy engine is done with the
// program's buffer then copies the wrong bytes, as it would on a GPU.

namespace {

struct Held {
  void* dst;
  const void* src;
  size_t n;
  uint64_t seq;
};
std::atomic<bool> g_defer{false};
std::vector<Held>& held() {
  static auto* v = new std::vector<Held>;
  return *v;
}

}  // namespace

namespace fake_internal {

std::mutex g_held_mu;
uint64_t g_held_seq = 0;  // under g_held_mu

// Runs the held copies up to and including sequence number `upto`, in order.
void run_held(uint64_t upto) {
  std::lock_guard<std::mutex> lock(g_held_mu);
  auto& v = held();
  size_t k = 0;
  for (; k < v.size() && v[k].seq <= upto; ++k) std::memmove(v[k].dst, v[k].src, v[k].n);
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k));
}

// Pinned memory going away while a held copy still reads or writes it: the interposer's bug.
void check_not_held(uintptr_t lo, uintptr_t hi) {
  std::lock_guard<std::mutex> lock(g_held_mu);
  for (const Held& h : held()) {
    for (const void* p : {static_cast<const void*>(h.dst), h.src}) {
      auto a = reinterpret_cast<uintptr_t>(p);
      if (a < hi && a + h.n > lo) {
        std::fprintf(stderr, "fake_cuda: pinned memory at %#lx freed or unregistered while a copy still uses it\n",
                     static_cast<unsigned long>(lo));
        std::abort();
      }
    }
  }
}

}  // namespace fake_internal

FAKE_EXPORT void fake_cuda_set_defer(int on) {
  g_defer.store(on != 0);
  if (!on) run_held();
}

// ---- copies ---------------------------------------------------------------------------------------------

namespace {

// The device side of a typed copy or a memset must be memory the driver knows (with unified
// addressing, pinned and registered host memory is addressable from the device too).
// As on a GPU, a copy may span neighbouring mappings (the chunks of a VMM range), as long as every
// byte of it is mapped.
CUresult device_range(CUdeviceptr p, size_t n) {
  if (p == 0) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t at = static_cast<uintptr_t>(p);
  const uintptr_t end = at + (n ? n : 1);
  while (at < end) {
    Block b;
    if (!find_block(at, 1, &b)) return CUDA_ERROR_INVALID_VALUE;
    at = b.base + b.size;
  }
  return CUDA_SUCCESS;
}

CUresult copy(void* dst, const void* src, size_t n) {
  FAKE_TRY(need_ctx());
  run_held();
  if (n == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(dst, src, n);
  return CUDA_SUCCESS;
}

CUresult htod(CUdeviceptr d, const void* s, size_t n) {
  if (n) FAKE_TRY(device_range(d, n));
  return copy(dp(d), s, n);
}
CUresult dtoh(void* d, CUdeviceptr s, size_t n) {
  if (n) FAKE_TRY(device_range(s, n));
  return copy(d, dp(s), n);
}

std::atomic<void (*)(void*)> g_before_async{nullptr};
void* g_before_async_arg = nullptr;

// An async copy: held back when deferral is on and its host side starts in pinned or registered memory.
CUresult async_copy(void* dst, const void* src, size_t n, const void* host, CUdeviceptr dev) {
  if (auto fn = g_before_async.exchange(nullptr)) fn(g_before_async_arg);
  Block b;
  // As the driver does, the start of the host range decides.
  if (!g_defer.load() || n == 0 || !find_block(reinterpret_cast<uintptr_t>(host), 1, &b) ||
      (b.kind != Kind::pinned && b.kind != Kind::registered)) {
    return copy(dst, src, n);
  }
  FAKE_TRY(need_ctx());
  FAKE_TRY(device_range(dev, n));
  std::lock_guard<std::mutex> lock(g_held_mu);
  held().push_back(Held{dst, src, n, ++g_held_seq});
  return CUDA_SUCCESS;
}
CUresult htod_async(CUdeviceptr d, const void* s, size_t n) { return async_copy(dp(d), s, n, s, d); }
CUresult dtoh_async(void* d, CUdeviceptr s, size_t n) { return async_copy(d, dp(s), n, d, s); }
CUresult dtod(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (n) {
    FAKE_TRY(device_range(d, n));
    FAKE_TRY(device_range(s, n));
  }
  return copy(dp(d), dp(s), n);
}
// cuMemcpy and friends: unified addressing, any pointer will do.
CUresult any_copy(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(dp(d), dp(s), n); }
CUresult peer_copy(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  if (!dc || !sc) return CUDA_ERROR_INVALID_CONTEXT;
  return dtod(d, s, n);
}

CUresult operand(CUmemorytype type, const void* host, CUdeviceptr dev, unsigned char** out) {
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      *out = static_cast<unsigned char*>(const_cast<void*>(host));
      break;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
      *out = static_cast<unsigned char*>(dp(dev));
      break;
    case CU_MEMORYTYPE_ARRAY:
      return CUDA_ERROR_NOT_SUPPORTED;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// What a 2D or 3D copy descriptor starts with: its two sides, and rows that fit their pitches.
template <typename C>
CUresult sides(const C* c, unsigned char** src, unsigned char** dst) {
  FAKE_TRY(need_ctx());
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  FAKE_TRY(operand(c->srcMemoryType, c->srcHost, c->srcDevice, src));
  FAKE_TRY(operand(c->dstMemoryType, c->dstHost, c->dstDevice, dst));
  if (c->Height > 1 && (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult copy_2d(const CUDA_MEMCPY2D* c) {
  unsigned char *src = nullptr, *dst = nullptr;
  FAKE_TRY(sides(c, &src, &dst));
  for (size_t y = 0; y < c->Height; ++y) {
    std::memmove(dst + (c->dstY + y) * c->dstPitch + c->dstXInBytes, src + (c->srcY + y) * c->srcPitch + c->srcXInBytes,
                 c->WidthInBytes);
  }
  return CUDA_SUCCESS;
}

template <typename C>
CUresult copy_3d(const C* c) {
  unsigned char *src = nullptr, *dst = nullptr;
  FAKE_TRY(sides(c, &src, &dst));
  if (c->Depth > 1 && (c->srcHeight < c->Height || c->dstHeight < c->Height)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t z = 0; z < c->Depth; ++z) {
    for (size_t y = 0; y < c->Height; ++y) {
      size_t so = ((c->srcZ + z) * c->srcHeight + c->srcY + y) * c->srcPitch + c->srcXInBytes;
      size_t doff = ((c->dstZ + z) * c->dstHeight + c->dstY + y) * c->dstPitch + c->dstXInBytes;
      std::memmove(dst + doff, src + so, c->WidthInBytes);
    }
  }
  return CUDA_SUCCESS;
}

CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER* c) {
  if (c && (!c->srcContext || !c->dstContext)) return CUDA_ERROR_INVALID_CONTEXT;
  return copy_3d(c);
}

CUresult batch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
               size_t* attr_idx, size_t num_attrs, size_t* fail, CUstream stream) {
  FAKE_TRY(need_ctx());
  if (fail) *fail = SIZE_MAX;
  if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attr_idx || num_attrs == 0 || num_attrs > count ||
      attr_idx[0] != 0 || !stream) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < num_attrs; ++i) {
    if (attrs[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    CUresult r = copy(dp(dsts[i]), dp(srcs[i]), sizes[i]);
    if (r != CUDA_SUCCESS) {
      if (fail) *fail = i;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

CUresult batch_3d(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail, unsigned long long flags, CUstream stream) {
  FAKE_TRY(need_ctx());
  if (fail) *fail = SIZE_MAX;
  if (n == 0 || !ops || flags != 0 || !stream) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) {
    const CUDA_MEMCPY3D_BATCH_OP& op = ops[i];
    if (op.src.type != CU_MEMCPY_OPERAND_TYPE_POINTER || op.dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER) {
      if (fail) *fail = i;
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    const CUextent3D& e = op.extent;
    if (!e.width || !e.height || !e.depth || op.srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) {
      if (fail) *fail = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Pointer to pointer: the element is one byte; zero row length or layer height means packed.
    size_t srow = op.src.op.ptr.rowLength ? op.src.op.ptr.rowLength : e.width;
    size_t slayer = op.src.op.ptr.layerHeight ? op.src.op.ptr.layerHeight : e.height;
    size_t drow = op.dst.op.ptr.rowLength ? op.dst.op.ptr.rowLength : e.width;
    size_t dlayer = op.dst.op.ptr.layerHeight ? op.dst.op.ptr.layerHeight : e.height;
    auto* s = static_cast<unsigned char*>(dp(op.src.op.ptr.ptr));
    auto* d = static_cast<unsigned char*>(dp(op.dst.op.ptr.ptr));
    if (!s || !d) {
      if (fail) *fail = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t z = 0; z < e.depth; ++z) {
      for (size_t y = 0; y < e.height; ++y) {
        std::memmove(d + (z * dlayer + y) * drow, s + (z * slayer + y) * srow, e.width);
      }
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_EXPORT void fake_cuda_before_next_async_copy(void (*fn)(void*), void* arg) {
  g_before_async_arg = arg;
  g_before_async.store(fn);
}

FAKE_PAIR(cuMemcpy, cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), return any_copy(d, s, n);)
FAKE_PAIR(cuMemcpyAsync, cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream),
          return any_copy(d, s, n);)
FAKE_PAIR(cuMemcpyPeer, cuMemcpyPeer_ptds, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n),
          return peer_copy(d, dc, s, sc, n);)
FAKE_PAIR(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz,
          (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream),
          return peer_copy(d, dc, s, sc, n);)
FAKE_PAIR(cuMemcpy3DPeer, cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER* c), return copy_3d_peer(c);)
FAKE_PAIR(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER* c, CUstream),
          return copy_3d_peer(c);)
FAKE_PAIR(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void* s, size_t n), return htod(d, s, n);)
FAKE_PAIR(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, (void* d, CUdeviceptr s, size_t n), return dtoh(d, s, n);)
FAKE_PAIR(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), return dtod(d, s, n);)
FAKE_PAIR(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void* s, size_t n, CUstream),
          return htod_async(d, s, n);)
FAKE_PAIR(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, (void* d, CUdeviceptr s, size_t n, CUstream),
          return dtoh_async(d, s, n);)
namespace {
std::atomic<unsigned long long> g_dtod_async_bytes{0};
}  // namespace
FAKE_EXPORT unsigned long long fake_cuda_dtod_async_bytes() { return g_dtod_async_bytes.load(); }
FAKE_PAIR(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream),
          g_dtod_async_bytes += n; return dtod(d, s, n);)
FAKE_PAIR(cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D* c), return copy_2d(c);)
FAKE_PAIR(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D* c), return copy_2d(c);)
FAKE_PAIR(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D* c, CUstream), return copy_2d(c);)
FAKE_PAIR(cuMemcpy3D_v2, cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D* c), return copy_3d(c);)
FAKE_PAIR(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D* c, CUstream), return copy_3d(c);)

// CUDA arrays: not supported by the stand-in.
FAKE_PAIR(cuMemcpyHtoA_v2, cuMemcpyHtoA_v2_ptds, (CUarray, size_t, const void*, size_t), return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyAtoH_v2, cuMemcpyAtoH_v2_ptds, (void*, CUarray, size_t, size_t), return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyDtoA_v2, cuMemcpyDtoA_v2_ptds, (CUarray, size_t, CUdeviceptr, size_t), return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyAtoD_v2, cuMemcpyAtoD_v2_ptds, (CUdeviceptr, CUarray, size_t, size_t), return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyAtoA_v2, cuMemcpyAtoA_v2_ptds, (CUarray, size_t, CUarray, size_t, size_t),
          return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2_ptsz, (CUarray, size_t, const void*, size_t, CUstream),
          return CUDA_ERROR_NOT_SUPPORTED;)
FAKE_PAIR(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2_ptsz, (void*, CUarray, size_t, size_t, CUstream),
          return CUDA_ERROR_NOT_SUPPORTED;)

// Batches: CUDA 12.8's form reports a failing index, CUDA 13.0's (_v2) does not.
FAKE_PAIR(cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz,
          (CUdeviceptr * d, CUdeviceptr * s, size_t * n, size_t count_, CUmemcpyAttributes * attrs, size_t * idx,
           size_t num_attrs, size_t * fail, CUstream st),
          return batch(d, s, n, count_, attrs, idx, num_attrs, fail, st);)
FAKE_PAIR(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz,
          (CUdeviceptr * d, CUdeviceptr * s, size_t * n, size_t count_, CUmemcpyAttributes * attrs, size_t * idx,
           size_t num_attrs, CUstream st),
          return batch(d, s, n, count_, attrs, idx, num_attrs, nullptr, st);)
FAKE_PAIR(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_ptsz,
          (size_t n, CUDA_MEMCPY3D_BATCH_OP * ops, size_t * fail, unsigned long long flags, CUstream st),
          return batch_3d(n, ops, fail, flags, st);)
FAKE_PAIR(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz,
          (size_t n, CUDA_MEMCPY3D_BATCH_OP * ops, unsigned long long flags, CUstream st),
          return batch_3d(n, ops, nullptr, flags, st);)

// ---- memsets ------------------------------------------------------------------------------------------

namespace {

template <typename T>
CUresult fill(CUdeviceptr d, T v, size_t n) {
  FAKE_TRY(need_ctx());
  run_held();
  if (n == 0) return CUDA_SUCCESS;
  if (d % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  FAKE_TRY(device_range(d, n * sizeof(T)));
  T* p = static_cast<T*>(dp(d));
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return CUDA_SUCCESS;
}

template <typename T>
CUresult fill_2d(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h) {
  FAKE_TRY(need_ctx());
  run_held();
  if (w == 0 || h == 0) return CUDA_SUCCESS;
  if (d % sizeof(T) != 0 || (h > 1 && pitch < w * sizeof(T))) return CUDA_ERROR_INVALID_VALUE;
  FAKE_TRY(device_range(d, (h - 1) * pitch + w * sizeof(T)));
  for (size_t y = 0; y < h; ++y) {
    T* row = reinterpret_cast<T*>(static_cast<unsigned char*>(dp(d)) + y * pitch);
    for (size_t x = 0; x < w; ++x) row[x] = v;
  }
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_PAIR(cuMemsetD8_v2, cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), return fill(d, v, n);)
FAKE_PAIR(cuMemsetD16_v2, cuMemsetD16_v2_ptds, (CUdeviceptr d, unsigned short v, size_t n), return fill(d, v, n);)
FAKE_PAIR(cuMemsetD32_v2, cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned int v, size_t n), return fill(d, v, n);)
FAKE_PAIR(cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds, (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h),
          return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds, (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h),
          return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds, (CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h),
          return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD8Async, cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream),
          return fill(d, v, n);)
FAKE_PAIR(cuMemsetD16Async, cuMemsetD16Async_ptsz, (CUdeviceptr d, unsigned short v, size_t n, CUstream),
          return fill(d, v, n);)
FAKE_PAIR(cuMemsetD32Async, cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream),
          return fill(d, v, n);)
FAKE_PAIR(cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz,
          (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream), return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz,
          (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream), return fill_2d(d, p, v, w, h);)
FAKE_PAIR(cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz,
          (CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream), return fill_2d(d, p, v, w, h);)


// Stream memory operations: the stand-in's work runs at once, so a write is a one-word fill.
FAKE_PAIR(cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz, (CUstream, CUdeviceptr d, cuuint32_t v, unsigned int),
          return fill(d, static_cast<uint32_t>(v), 1);)
FAKE_PAIR(cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz, (CUstream, CUdeviceptr d, cuuint64_t v, unsigned int),
          return fill(d, static_cast<uint64_t>(v), 1);)
FAKE_PAIR(cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz, (CUstream, CUdeviceptr, cuuint64_t, unsigned int),
          return need_ctx();)
FAKE_PAIR(cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2_ptsz, (CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int),
          return need_ctx();)
FAKE_PAIR(cuStreamWriteValue32, cuStreamWriteValue32_ptsz, (CUstream, CUdeviceptr d, cuuint32_t v, unsigned int),
          return fill(d, static_cast<uint32_t>(v), 1);)
FAKE_PAIR(cuStreamWriteValue64, cuStreamWriteValue64_ptsz, (CUstream, CUdeviceptr d, cuuint64_t v, unsigned int),
          return fill(d, static_cast<uint64_t>(v), 1);)
FAKE_PAIR(cuStreamWaitValue32, cuStreamWaitValue32_ptsz, (CUstream, CUdeviceptr, cuuint32_t, unsigned int),
          return need_ctx();)
FAKE_PAIR(cuStreamWaitValue64, cuStreamWaitValue64_ptsz, (CUstream, CUdeviceptr, cuuint64_t, unsigned int),
          return need_ctx();)
FAKE_PAIR(cuStreamBatchMemOp, cuStreamBatchMemOp_ptsz, (CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int),
          return need_ctx();)
