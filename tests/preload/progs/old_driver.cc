// (j) An older driver (the stand-in built as CUDA 12.6: no batch copies) under a shim that exports
// hooks for every implementation up to CUDA 13.0. Probing must stay honest: a global lookup of a
// hook whose implementation the driver lacks finds nothing (the shim's export must not pretend),
// cuGetProcAddress says the symbol is not there, and everything the driver has works and is counted.
#include "common.h"

int main(int argc, char** argv) {
  bool shim = preload::has_arg(argc, argv, "--shim");
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(h);
  auto calls = reinterpret_cast<fake_cuda_calls_fn>(dlsym(h, "fake_cuda_calls"));
  auto gpa2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
  auto version = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(dlsym(h, "cuDriverGetVersion"));
  CHECK(calls && gpa2 && version);
  int v = 0;
  CK(version(&v));
  CHECK(v == 12060);

  for (const char* name : {"cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2", "cuMemcpy3DBatchAsync_v2_ptsz"}) {
    CHECK(dlsym(h, name) == nullptr);
    CHECK(dlerror() != nullptr);
    // The shim exports a hook under this name, but there is nothing behind it.
    CHECK(dlsym(RTLD_DEFAULT, name) == nullptr);
    const char* err = dlerror();
    CHECK(err != nullptr);
  }
  void* p = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  CHECK_RESULT(gpa2("cuMemcpyBatchAsync", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  CHECK(p == nullptr && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  // What the driver has is found, also when asked with a newer version than its own.
  CK(gpa2("cuMemAdvise", &p, 13000, 0, &st));
  CHECK(p == dlsym(h, "cuMemAdvise_v2"));
  preload::check_hooked(p, shim, "cuMemAdvise_v2");
  void* global = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  if (shim) {
    CHECK(global && global == dlsym(h, "cuMemAlloc_v2"));
  } else {
    CHECK(global == nullptr);  // RTLD_LOCAL, and no shim exporting it
  }

  for (bool per_thread : {false, true}) {
    preload::Api api;
    preload::fill_api_from_proc(&api, gpa2, 13000, per_thread, shim);
    preload::run_workload_checked(api, 64 * 1024, calls, per_thread);
  }
  std::printf("old_driver: ok\n");
  return 0;
}
