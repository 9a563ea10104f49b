// (i) Bad input never crashes the shim: NULL output pointers, calls before cuInit and without a
// context, double and unknown frees, NULL descriptors, NULL kernels, bad cuGetProcAddress queries.
// Every failing call is still counted (as an error of its family); a successful free of memory the
// shim never saw allocated counts in anomalies.unknown_frees. Then the standard workload runs and
// must compute correctly: the runner also runs this program with invalid GPUMEMSHIM_* values.
// Expected counts: BadInputModel in the runner.
#include <type_traits>

#include "common.h"

// The CUDA 12.8 batch form under its literal name (cuda.h maps the name to the 13.0 form, _v2).
#undef cuMemcpyBatchAsync
extern "C" std::remove_pointer_t<PFN_cuMemcpyBatchAsync_v12080> cuMemcpyBatchAsync;

int main(int argc, char** argv) {
  bool shim = preload::has_arg(argc, argv, "--shim");
  CUdeviceptr d = 0;
  const CUresult INVALID = CUDA_ERROR_INVALID_VALUE;

  // Before cuInit, then without a current context.                    mem_alloc: 2 calls, 2 errors
  CHECK_RESULT(cuMemAlloc(&d, 4096), CUDA_ERROR_NOT_INITIALIZED);
  CK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK_RESULT(cuMemAlloc(&d, 4096), CUDA_ERROR_INVALID_CONTEXT);
  CK(cuCtxSetCurrent(ctx));
  CUstream s = nullptr;
  CK(cuStreamCreate(&s, 0));

  // NULL outputs.                                                      mem_get_info: 3 calls, 3 errors
  size_t total = 0, free_b = 0;
  CHECK_RESULT(cuMemGetInfo(nullptr, &total), INVALID);
  CHECK_RESULT(cuMemGetInfo(&free_b, nullptr), INVALID);
  CHECK_RESULT(cuMemGetInfo(nullptr, nullptr), INVALID);
  //                                                                    mem_alloc: +5 calls, +5 errors
  CHECK_RESULT(cuMemAlloc(nullptr, 4096), INVALID);
  CHECK_RESULT(cuMemAlloc(&d, 0), INVALID);
  size_t pitch = 0;
  CHECK_RESULT(cuMemAllocPitch(&d, nullptr, 64, 4, 4), INVALID);
  CHECK_RESULT(cuMemAllocPitch(nullptr, &pitch, 64, 4, 4), INVALID);
  CHECK_RESULT(cuMemAllocAsync(nullptr, 4096, s), INVALID);
  //                                                                    mem_alloc_managed: 1 call, 1 error
  CHECK_RESULT(cuMemAllocManaged(nullptr, 4096, CU_MEM_ATTACH_GLOBAL), INVALID);
  //                                                                    host_alloc: 2 calls, 2 errors
  CHECK_RESULT(cuMemHostAlloc(nullptr, 4096, 0), INVALID);
  CHECK_RESULT(cuMemAllocHost(nullptr, 4096), INVALID);

  // Frees.                                        mem_alloc: +1 call (4096); mem_free: 4 calls (4096), 1 error
  CK(cuMemAlloc(&d, 4096));
  CK(cuMemFree(d));
  CHECK_RESULT(cuMemFree(d), INVALID);  // double free: the driver refuses it
  CK(cuMemFree(0));                     // NULL: accepted, nothing to forget, no anomaly
  CUdeviceptr unknown = fake_cuda_alloc_untracked(8192);
  CHECK(unknown);
  CK(cuMemFree(unknown));               // anomalies.unknown_frees 1
  //                                                    host_free: 2 calls, 1 error; unknown_frees 2
  void* unknown_host = fake_cuda_host_alloc_untracked(8192);
  CHECK(unknown_host);
  CK(cuMemFreeHost(unknown_host));
  CHECK_RESULT(cuMemFreeHost(nullptr), INVALID);

  // Copies and memsets with bad arguments.                             memcpy: 8 calls, 8 errors
  unsigned char buf[64] = {};
  CHECK_RESULT(cuMemcpyHtoD(0, buf, sizeof(buf)), INVALID);
  CHECK_RESULT(cuMemcpy2D(nullptr), INVALID);
  CHECK_RESULT(cuMemcpy3D(nullptr), INVALID);
  CHECK_RESULT(cuMemcpy3DPeer(nullptr), INVALID);
  CHECK_RESULT(cuMemcpyBatchAsync_v2(nullptr, nullptr, nullptr, 2, nullptr, nullptr, 0, s), INVALID);
  CHECK_RESULT(cuMemcpyBatchAsync(nullptr, nullptr, nullptr, 2, nullptr, nullptr, 0, nullptr, s), INVALID);
  CHECK_RESULT(cuMemcpy3DBatchAsync_v2(2, nullptr, 0, s), INVALID);
  CHECK_RESULT(cuMemcpyHtoA_v2(nullptr, 0, buf, sizeof(buf)), CUDA_ERROR_NOT_SUPPORTED);
  //                                                                    memset: 2 calls, 2 errors
  CHECK_RESULT(cuMemsetD32(0, 0, 4), INVALID);
  CHECK_RESULT(cuMemsetD2D8(0, 64, 0, 64, 2), INVALID);

  // Launches.                                                          launch: 4 calls, 4 errors
  void* params[] = {nullptr};
  CHECK_RESULT(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr), CUDA_ERROR_INVALID_HANDLE);
  CHECK_RESULT(cuLaunchKernelEx(nullptr, preload::as_function(preload::k_add3), params, nullptr), INVALID);
  CHECK_RESULT(cuLaunchCooperativeKernel(preload::as_function(preload::k_add3), 0, 1, 1, 1, 1, 1, 0, s, params), INVALID);
  CHECK_RESULT(cuGraphLaunch(nullptr, s), INVALID);

  // Host registration.                         host_register: 1 call, 1 error; host_unregister: 2 calls, 2 errors
  CHECK_RESULT(cuMemHostRegister(nullptr, 4096, 0), INVALID);
  CHECK_RESULT(cuMemHostUnregister(nullptr), INVALID);
  CHECK_RESULT(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

  // Hints on memory that is not managed.                 prefetch: 1 call, 1 error; advise: 1 call, 1 error
  CUdeviceptr plain = 0;
  CK(cuMemAlloc(&plain, 4096));  //                                     mem_alloc: +1 call (4096)
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CHECK_RESULT(cuMemPrefetchAsync_v2(plain, 4096, loc, 0, s), INVALID);
  CHECK_RESULT(cuMemAdvise_v2(0, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, loc), INVALID);
  CK(cuMemFree(plain));          //                                     mem_free: +1 call (4096)

  // VMM with bad handles.                                              vmm: 4 calls, 4 errors
  CHECK_RESULT(cuMemCreate(nullptr, 2 << 20, nullptr, 0), INVALID);
  CHECK_RESULT(cuMemMap(0, 2 << 20, 0, 12345, 0), INVALID);
  CHECK_RESULT(cuMemUnmap(0, 2 << 20), INVALID);
  CHECK_RESULT(cuMemRelease(12345), INVALID);

  // cuGetProcAddress: bad queries answer, never crash (not counted in any family).
  void* p = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  CHECK_RESULT(cuGetProcAddress_v2(nullptr, &p, 12000, 0, &st), INVALID);
  CHECK_RESULT(cuGetProcAddress_v2("cuMemAlloc", nullptr, 12000, 0, &st), INVALID);
  CHECK_RESULT(cuGetProcAddress_v2("cuMemAlloc", &p, 12000, 0x80, &st), INVALID);
  CHECK_RESULT(cuGetProcAddress_v2("cuNoSuchEntryPoint", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  CHECK(p == nullptr && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CHECK_RESULT(cuGetProcAddress_v2("cuMemAlloc", &p, 1000, 0, &st), CUDA_ERROR_NOT_FOUND);
  CHECK(p == nullptr && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  CK(cuGetProcAddress_v2("cuMemAlloc", &p, 12000, 0, nullptr));  // no status wanted
  preload::check_hooked(p, shim, "cuMemAlloc via cuGetProcAddress_v2");

  CK(cuStreamDestroy(s));
  CK(cuCtxSetCurrent(nullptr));

  // And after all that, real work gives the right answers.
  preload::run_workload(preload::Linked{}, 64 * 1024);
  std::printf("bad_input: ok\n");
  return 0;
}
