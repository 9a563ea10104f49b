// (b) A program that loads the driver itself and looks up each implementation by its exported
// name, as PyTorch does for cuLaunchKernel, cuMemcpyDtoH_v2 and friends.
#include "common.h"

int main(int argc, char** argv) {
  bool shim = preload::has_arg(argc, argv, "--shim");
  size_t n = 64 * 1024;

  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(h);
  auto calls = reinterpret_cast<fake_cuda_calls_fn>(dlsym(h, "fake_cuda_calls"));
  CHECK(calls);
  CHECK(preload::in_fake(reinterpret_cast<void*>(calls)));

  preload::Api api;
  preload::fill_api(&api, false, shim, [&](const char*, int, const char* impl) { return dlsym(h, impl); });

  // A name the driver does not have: dlsym fails (and glibc allocates its error message inside it).
  CHECK(dlsym(h, "cuNoSuchEntryPoint_v9") == nullptr);
  CHECK(dlerror() != nullptr);
  // The library is RTLD_LOCAL: a global lookup finds the shim's export when it is preloaded (which
  // then must stand for the real implementation), and nothing without it.
  void* global = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  if (shim) {
    CHECK(global && preload::in_shim(global));
    CHECK(global == reinterpret_cast<void*>(api.alloc));
  } else {
    CHECK(global == nullptr);
  }
  preload::check_hooked(dlsym(h, "cuGetProcAddress_v2"), shim, "cuGetProcAddress_v2");

  preload::run_workload_checked(api, n, calls, false);
  std::printf("dlopen: ok\n");
  return 0;
}
