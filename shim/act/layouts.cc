#include "act/layouts.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "act/config.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/runtime.h"
#include "driver/calls.h"

namespace gms::act {

using driver::call_real;

const std::vector<Param>& kernel_layout(CUfunction f) {
  static NoDestructor<std::mutex> mu;
  static NoDestructor<std::unordered_map<CUfunction, std::vector<Param>>> layouts;
  std::lock_guard lock(*mu);
  auto it = layouts->find(f);
  if (it != layouts->end()) return it->second;
  std::vector<Param> params;
  // The CUDA runtime launches library-managed kernels: a CUkernel handle passed where a CUfunction
  // goes, which cuFuncGetParamInfo does not accept. Ask the one that answers for index 0.
  bool as_kernel = false;
  size_t off = 0, size = 0;
  if (call_real(GMS_REAL(cuFuncGetParamInfo), f, size_t{0}, &off, &size) != CUDA_SUCCESS) {
    as_kernel = call_real(GMS_REAL(cuKernelGetParamInfo), reinterpret_cast<CUkernel>(f), size_t{0}, &off, &size) ==
                CUDA_SUCCESS;
  }
  for (size_t i = 0; i < 4096; ++i) {
    CUresult r = as_kernel ? call_real(GMS_REAL(cuKernelGetParamInfo), reinterpret_cast<CUkernel>(f), i, &off, &size)
                           : call_real(GMS_REAL(cuFuncGetParamInfo), f, i, &off, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    if (r != CUDA_SUCCESS) {
      static const std::vector<Param> kUnknown;  // a failed query: not kept, this launch unscanned
      return kUnknown;
    }
    params.push_back(Param{static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
  }
  // NCCL's kernels find their buffers in work descriptors they read from memory (host memory
  // among it) that no copy the shim sees fills: under scan order, work no scan sees.
  const char* name = nullptr;
  if (scan_order() &&
      (as_kernel ? call_real(GMS_REAL(cuKernelGetName), &name, reinterpret_cast<CUkernel>(f))
                 : call_real(GMS_REAL(cuFuncGetName), &name, f)) == CUDA_SUCCESS &&
      name && (std::strstr(name, "ncclDevKernel") || std::strstr(name, "ncclKernel"))) {
    params.clear();
  }
  if (params.empty() && log_enabled(LogLevel::debug)) {
    Line l;
    l.str("no parameter layout for function ").hex(reinterpret_cast<uintptr_t>(f)).str(": its launches are not scanned");
    log(LogLevel::debug, l);
  }
  return layouts->emplace(f, std::move(params)).first->second;  // nodes stay where they are
}

uint64_t function_key(CUfunction f) {
  static NoDestructor<std::mutex> mu;
  static NoDestructor<std::unordered_map<CUfunction, uint64_t>> keys;
  std::lock_guard lock(*mu);
  if (auto it = keys->find(f); it != keys->end()) return it->second;
  uint64_t key = reinterpret_cast<uintptr_t>(f);
  const char* name = nullptr;
  if ((call_real(GMS_REAL(cuFuncGetName), &name, f) == CUDA_SUCCESS ||
       call_real(GMS_REAL(cuKernelGetName), &name, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS) &&
      name) {
    key = 0xcbf29ce484222325ull;  // FNV-1a
    for (const char* c = name; *c; ++c) key = (key ^ static_cast<unsigned char>(*c)) * 0x100000001b3ull;
  }
  // New handles for every pass would grow the map without end.
  if (keys->size() >= (1u << 16)) keys->clear();
  keys->emplace(f, key);
  return key;
}

}  // namespace gms::act
