// Kernel and graph launches, stream memory operations, synchronisations, and the unified-memory hints
// (observed only, for now).
#include "act/census.h"
#include "act/residency.h"
#include "act/textures.h"
#include "common.h"

using namespace gms;
using namespace gms::entry;

#define GMS_UNPAREN(...) __VA_ARGS__
// PREPARE runs before the real launch: the residency planner's prefetches go on the same stream.
// FINISH after it, told whether it launched.
#define GMS_LAUNCH_HOOK(sym, params, args, KIND, PREPARE, FINISH) \
  GMS_EXPORT CUresult sym params {                                \
    GMS_NESTED(sym, GMS_UNPAREN args);                            \
    act::census_launch();                                         \
    PREPARE;                                                      \
    CUresult r = call_real(GMS_REAL(sym), GMS_UNPAREN args);      \
    act::census_launched(ok(r));                                  \
    FINISH;                                                       \
    observe::launch(LaunchKind::KIND, ok(r));                     \
    return r;                                                     \
  }

#define GMS_LAUNCH(sym, PTSZ)                                                                                      \
  GMS_LAUNCH_HOOK(sym,                                                                                       \
                  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
                   unsigned shmem, CUstream st, void** params, void** extra),                                \
                  (f, gx, gy, gz, bx, by, bz, shmem, st, params, extra), kernel,                     \
                  act::before_launch(f, params, extra, st, PTSZ), act::after_launch(st, PTSZ, ok(r)))
#define GMS_LAUNCH_COOP(sym, PTSZ)                                                                                 \
  GMS_LAUNCH_HOOK(sym,                                                                                       \
                  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
                   unsigned shmem, CUstream st, void** params),                                              \
                  (f, gx, gy, gz, bx, by, bz, shmem, st, params), cooperative,                      \
                  act::before_launch(f, params, nullptr, st, PTSZ), act::after_launch(st, PTSZ, ok(r)))
#define GMS_LAUNCH_EX(sym, PTSZ) \
  GMS_LAUNCH_HOOK(sym, (const CUlaunchConfig* c, CUfunction f, void** params, void** extra), (c, f, params, extra), \
                  kernel_ex, if (c) act::before_launch(f, params, extra, c->hStream, PTSZ), \
                  if (c) act::after_launch(c->hStream, PTSZ, ok(r)))
// A graph's kernels and their arguments are fixed inside it: nothing to scan at launch.
#define GMS_GRAPH(sym) GMS_LAUNCH_HOOK(sym, (CUgraphExec g, CUstream st), (g, st), graph, act::UnscannedScope unscanned, (void)0)
GMS_LAUNCH(cuLaunchKernel, false)
GMS_LAUNCH(cuLaunchKernel_ptsz, true)
GMS_LAUNCH_COOP(cuLaunchCooperativeKernel, false)
GMS_LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz, true)
GMS_LAUNCH_EX(cuLaunchKernelEx, false)
GMS_LAUNCH_EX(cuLaunchKernelEx_ptsz, true)
GMS_GRAPH(cuGraphLaunch)
GMS_GRAPH(cuGraphLaunch_ptsz)

// Stream memory operations write or wait on one word: under scan order planned and marked like a
// memset of it, so that no move meets the write mid-copy (act::TransferScope). A batch, whose
// words the hook does not list, is work no scan sees.
#define GMS_STREAM_VALUE(sym, T, PTSZ)                                                  \
  GMS_EXPORT CUresult sym(CUstream st, CUdeviceptr a, T v, unsigned int flags) {        \
    GMS_NESTED(sym, st, a, v, flags);                                                   \
    act::TransferScope uses(static_cast<uintptr_t>(a), 0, st, PTSZ);                    \
    return call_real(GMS_REAL(sym), st, a, v, flags);                                   \
  }
#define GMS_STREAM_BATCH(sym)                                                                          \
  GMS_EXPORT CUresult sym(CUstream st, unsigned int n, CUstreamBatchMemOpParams* ops, unsigned int flags) { \
    GMS_NESTED(sym, st, n, ops, flags);                                                                \
    act::UnscannedScope unscanned;                                                                     \
    return call_real(GMS_REAL(sym), st, n, ops, flags);                                                \
  }
// The first forms (CUDA 8 and 9), which dlsym still finds by their names.
GMS_STREAM_VALUE(cuStreamWriteValue32, cuuint32_t, false)
GMS_STREAM_VALUE(cuStreamWriteValue32_ptsz, cuuint32_t, true)
GMS_STREAM_VALUE(cuStreamWriteValue64, cuuint64_t, false)
GMS_STREAM_VALUE(cuStreamWriteValue64_ptsz, cuuint64_t, true)
GMS_STREAM_VALUE(cuStreamWaitValue32, cuuint32_t, false)
GMS_STREAM_VALUE(cuStreamWaitValue32_ptsz, cuuint32_t, true)
GMS_STREAM_VALUE(cuStreamWaitValue64, cuuint64_t, false)
GMS_STREAM_VALUE(cuStreamWaitValue64_ptsz, cuuint64_t, true)
GMS_STREAM_BATCH(cuStreamBatchMemOp)
GMS_STREAM_BATCH(cuStreamBatchMemOp_ptsz)
GMS_STREAM_VALUE(cuStreamWriteValue32_v2, cuuint32_t, false)
GMS_STREAM_VALUE(cuStreamWriteValue32_v2_ptsz, cuuint32_t, true)
GMS_STREAM_VALUE(cuStreamWriteValue64_v2, cuuint64_t, false)
GMS_STREAM_VALUE(cuStreamWriteValue64_v2_ptsz, cuuint64_t, true)
GMS_STREAM_VALUE(cuStreamWaitValue32_v2, cuuint32_t, false)
GMS_STREAM_VALUE(cuStreamWaitValue32_v2_ptsz, cuuint32_t, true)
GMS_STREAM_VALUE(cuStreamWaitValue64_v2, cuuint64_t, false)
GMS_STREAM_VALUE(cuStreamWaitValue64_v2_ptsz, cuuint64_t, true)
GMS_STREAM_BATCH(cuStreamBatchMemOp_v2)
GMS_STREAM_BATCH(cuStreamBatchMemOp_v2_ptsz)

// A kernel reads a texture's memory through the object's handle, which the launch scan takes for
// the memory it names: a linear or pitched texture over movable memory is planned, awaited and
// marked like a pointer to it. (Surface objects and array textures read CUDA arrays, which no policy
// places or moves.) A destroyed handle is forgotten first: the driver may hand it out again as soon
// as the destroy returns.
GMS_EXPORT CUresult cuTexObjectCreate(CUtexObject* tex, const CUDA_RESOURCE_DESC* res, const CUDA_TEXTURE_DESC* td,
                                      const CUDA_RESOURCE_VIEW_DESC* view) {
  GMS_NESTED(cuTexObjectCreate, tex, res, td, view);
  CUresult r = call_real(GMS_REAL(cuTexObjectCreate), tex, res, td, view);
  if (ok(r) && tex && res) {
    if (res->resType == CU_RESOURCE_TYPE_LINEAR) act::texture_made(*tex, static_cast<uintptr_t>(res->res.linear.devPtr));
    if (res->resType == CU_RESOURCE_TYPE_PITCH2D) act::texture_made(*tex, static_cast<uintptr_t>(res->res.pitch2D.devPtr));
  }
  return r;
}

GMS_EXPORT CUresult cuTexObjectDestroy(CUtexObject tex) {
  GMS_NESTED(cuTexObjectDestroy, tex);
  const uintptr_t base = act::texture_gone(tex);
  CUresult r = call_real(GMS_REAL(cuTexObjectDestroy), tex);
  if (!ok(r) && base) act::texture_made(tex, base);  // still alive, so not handed out again
  return r;
}

// Synchronisations: from here the program's CPU may touch managed memory its kernels used; the
// trace's page census looks at those regions now (act/census.h). One relaxed load unless it does.
#define GMS_SYNC_HOOK(sym, params, args)                       \
  GMS_EXPORT CUresult sym params {                             \
    GMS_NESTED(sym, GMS_UNPAREN args);                         \
    CUresult r = call_real(GMS_REAL(sym), GMS_UNPAREN args);   \
    if (ok(r)) act::census_synchronized();                     \
    return r;                                                  \
  }
GMS_SYNC_HOOK(cuCtxSynchronize_v2, (CUcontext c), (c))
GMS_SYNC_HOOK(cuStreamSynchronize, (CUstream st), (st))
GMS_SYNC_HOOK(cuStreamSynchronize_ptsz, (CUstream st), (st))
GMS_SYNC_HOOK(cuEventSynchronize, (CUevent e), (e))

GMS_EXPORT CUresult cuCtxSynchronize() {
  if (::gms::in_shim()) return call_real(GMS_REAL(cuCtxSynchronize));
  CUresult r = call_real(GMS_REAL(cuCtxSynchronize));
  if (ok(r)) act::census_synchronized();
  return r;
}

#define GMS_HINT_HOOK(sym, params, args, bytes)              \
  GMS_EXPORT CUresult sym params {                           \
    GMS_NESTED(sym, GMS_UNPAREN args);                       \
    CUresult r = call_real(GMS_REAL(sym), GMS_UNPAREN args); \
    observe::call(Family::prefetch, ok(r), bytes);           \
    return r;                                                \
  }
// CUDA 8 forms name a device; CUDA 12.2+ (_v2) forms name a CUmemLocation.
GMS_HINT_HOOK(cuMemPrefetchAsync, (CUdeviceptr p, size_t n, CUdevice d, CUstream st), (p, n, d, st), n)
GMS_HINT_HOOK(cuMemPrefetchAsync_ptsz, (CUdeviceptr p, size_t n, CUdevice d, CUstream st), (p, n, d, st), n)
GMS_HINT_HOOK(cuMemPrefetchAsync_v2, (CUdeviceptr p, size_t n, CUmemLocation l, unsigned fl, CUstream st),
              (p, n, l, fl, st), n)
GMS_HINT_HOOK(cuMemPrefetchAsync_v2_ptsz, (CUdeviceptr p, size_t n, CUmemLocation l, unsigned fl, CUstream st),
              (p, n, l, fl, st), n)

GMS_EXPORT CUresult cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise advice, CUdevice d) {
  GMS_NESTED(cuMemAdvise, p, n, advice, d);
  CUresult r = call_real(GMS_REAL(cuMemAdvise), p, n, advice, d);
  observe::call(Family::advise, ok(r), n);
  if (ok(r)) act::residency_advised(addr(p));
  return r;
}

GMS_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation l) {
  GMS_NESTED(cuMemAdvise_v2, p, n, advice, l);
  CUresult r = call_real(GMS_REAL(cuMemAdvise_v2), p, n, advice, l);
  observe::call(Family::advise, ok(r), n);
  if (ok(r)) act::residency_advised(addr(p));
  return r;
}
