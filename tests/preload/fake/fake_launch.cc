// The stand-in driver's kernels: a CUfunction is a host function `void fn(void** kernelParams)` that
// the launch calls run at once; parameter layouts that tests describe; texture objects.
#include <cstring>
#include <string>

#include "act/swap/sum_mix.h"
#include "fake_internal.h"

using namespace fake_internal;

// ---- kernel parameters ----------------------------------------------------------------------------

namespace {

// Parameter layouts of host "kernels", for cuFuncGetParamInfo (registered by tests).
struct ParamLayout {
  size_t count;
  size_t sizes[16];
};
std::map<uintptr_t, ParamLayout>& kernel_params() {
  static auto* m = new std::map<uintptr_t, ParamLayout>;
  return *m;
}

}  // namespace

FAKE_EXPORT int fake_cuda_set_kernel_params(CUfunction f, const size_t* sizes, size_t count) {
  if (!f || count > 16 || (count && !sizes)) return -1;
  ParamLayout l{count, {}};
  for (size_t i = 0; i < count; ++i) l.sizes[i] = sizes[i];
  std::lock_guard<std::mutex> lock(g_mu);
  kernel_params()[reinterpret_cast<uintptr_t>(f)] = l;
  return 0;
}

namespace {

// Kernels' names, for cuFuncGetName (registered by tests; others have none).
std::map<uintptr_t, std::string>& kernel_names() {
  static auto* m = new std::map<uintptr_t, std::string>;
  return *m;
}

}  // namespace

FAKE_EXPORT int fake_cuda_set_kernel_name(CUfunction f, const char* name) {
  if (!f || !name) return -1;
  std::lock_guard<std::mutex> lock(g_mu);
  kernel_names()[reinterpret_cast<uintptr_t>(f)] = name;
  return 0;
}

FAKE_IMPL(cuFuncGetName)(const char** name, CUfunction f) {
  FAKE_ENTER(k_cuFuncGetName);
  if (!name || !f) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = kernel_names().find(reinterpret_cast<uintptr_t>(f));
  if (it == kernel_names().end()) return CUDA_ERROR_NOT_FOUND;
  *name = it->second.c_str();
  return CUDA_SUCCESS;
}

// The stand-in has no library-managed kernels: every handle is a CUfunction.
FAKE_IMPL(cuKernelGetName)(const char**, CUkernel) {
  FAKE_ENTER(k_cuKernelGetName);
  return CUDA_ERROR_INVALID_HANDLE;
}

FAKE_IMPL(cuKernelGetParamInfo)(CUkernel, size_t, size_t*, size_t*) {
  FAKE_ENTER(k_cuKernelGetParamInfo);
  return CUDA_ERROR_INVALID_HANDLE;
}

// Offsets are the sizes laid out with natural alignment, as the compiler lays out kernel parameters.
FAKE_IMPL(cuFuncGetParamInfo)(CUfunction f, size_t index, size_t* offset, size_t* size) {
  FAKE_ENTER(k_cuFuncGetParamInfo);
  FAKE_TRY(need_ctx());
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!offset || !size) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = kernel_params().find(reinterpret_cast<uintptr_t>(f));
  // A kernel nobody described is treated as taking no parameters.
  if (it == kernel_params().end() || index >= it->second.count) return CUDA_ERROR_INVALID_VALUE;
  size_t off = 0;
  for (size_t i = 0;; ++i) {
    size_t sz = it->second.sizes[i];
    size_t align = sz >= 8 ? 8 : (sz >= 4 ? 4 : (sz >= 2 ? 2 : 1));
    off = (off + align - 1) / align * align;
    if (i == index) {
      *offset = off;
      *size = sz;
      return CUDA_SUCCESS;
    }
    off += sz;
  }
}

// ---- modules: only the shim's own (act/swap/sums.cu), its kernel run on the host ---------------------

namespace {

// The chunk checksums (act/swap/sum_mix.h) over the memory at params[0], params[1] words, piece by
// piece of params[4] words, each salted with params[3], added into two words a piece at params[2],
// as the GPU's kernel does.
void chunk_sum(void** params) {
  namespace sum = gms::act::swap::sum;
  const auto* w = reinterpret_cast<const uint64_t*>(*static_cast<CUdeviceptr*>(params[0]));
  const uint64_t n = *static_cast<unsigned long long*>(params[1]);
  auto* out = reinterpret_cast<uint64_t*>(*static_cast<CUdeviceptr*>(params[2]));
  const uint64_t salt = *static_cast<unsigned long long*>(params[3]);
  const uint64_t piece = *static_cast<unsigned long long*>(params[4]);
  for (uint64_t from = 0, k = 0; from < n; from += piece, ++k) {
    uint64_t a = sum::salt_a(salt), b = sum::salt_b(salt);
    for (uint64_t i = from; i < n && i < from + piece; ++i) {
      a += sum::lane_a(w[i], i);
      b += sum::lane_b(w[i], i);
    }
    out[2 * k] += a;
    out[2 * k + 1] += b;
  }
}

int g_module;  // the one module's handle points here

}  // namespace

FAKE_IMPL(cuModuleLoadData)(CUmodule* m, const void* image) {
  FAKE_ENTER(k_cuModuleLoadData);
  FAKE_TRY(need_ctx());
  if (!m || !image) return CUDA_ERROR_INVALID_VALUE;
  if (!std::strstr(static_cast<const char*>(image), ".entry gms_chunk_sum")) return CUDA_ERROR_INVALID_IMAGE;
  *m = reinterpret_cast<CUmodule>(&g_module);
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuModuleGetFunction)(CUfunction* f, CUmodule m, const char* name) {
  FAKE_ENTER(k_cuModuleGetFunction);
  if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
  if (m != reinterpret_cast<CUmodule>(&g_module)) return CUDA_ERROR_INVALID_HANDLE;
  if (std::strcmp(name, gms::act::swap::sum::kKernel) != 0) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(&chunk_sum);
  return CUDA_SUCCESS;
}

// ---- launches ------------------------------------------------------------------------------------------

namespace {

using HostKernel = void (*)(void**);
CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                void** params) {
  FAKE_TRY(need_ctx());
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  run_held();
  if (!gx || !gy || !gz || !bx || !by || !bz) return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<HostKernel>(f)(params);
  return CUDA_SUCCESS;
}
CUresult launch_ex(const CUlaunchConfig* c, CUfunction f, void** params) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, params);
}

}  // namespace

FAKE_PAIR(cuLaunchKernel, cuLaunchKernel_ptsz,
          (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned,
           CUstream, void** params, void**),
          return launch(f, gx, gy, gz, bx, by, bz, params);)
FAKE_PAIR(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz,
          (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned,
           CUstream, void** params),
          return launch(f, gx, gy, gz, bx, by, bz, params);)
FAKE_PAIR(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, (const CUlaunchConfig* c, CUfunction f, void** params, void**),
          return launch_ex(c, f, params);)
FAKE_PAIR(cuGraphLaunch, cuGraphLaunch_ptsz, (CUgraphExec g, CUstream),
          FAKE_TRY(need_ctx()); return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;)

// ---- texture objects: linear and pitched only (the stand-in has no CUDA arrays) -------------------

namespace {

std::map<CUtexObject, CUdeviceptr>& textures() {
  static auto* m = new std::map<CUtexObject, CUdeviceptr>;
  return *m;
}

}  // namespace

FAKE_IMPL(cuTexObjectCreate)(CUtexObject* tex, const CUDA_RESOURCE_DESC* res, const CUDA_TEXTURE_DESC*,
                             const CUDA_RESOURCE_VIEW_DESC*) {
  FAKE_ENTER(k_cuTexObjectCreate);
  FAKE_TRY(need_ctx());
  if (!tex || !res) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr at = 0;
  if (res->resType == CU_RESOURCE_TYPE_LINEAR) at = res->res.linear.devPtr;
  else if (res->resType == CU_RESOURCE_TYPE_PITCH2D) at = res->res.pitch2D.devPtr;
  else return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(g_mu);
  // The smallest number not in use, as the real driver reuses its handles.
  CUtexObject t = 1;
  while (textures().count(t)) ++t;
  textures()[t] = at;
  *tex = t;
  return CUDA_SUCCESS;
}

FAKE_IMPL(cuTexObjectDestroy)(CUtexObject tex) {
  FAKE_ENTER(k_cuTexObjectDestroy);
  FAKE_TRY(need_ctx());
  std::lock_guard<std::mutex> lock(g_mu);
  return textures().erase(tex) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUdeviceptr fake_cuda_texture_ptr(CUtexObject tex) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = textures().find(tex);
  return it == textures().end() ? 0 : it->second;
}
