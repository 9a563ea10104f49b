// (e) Programs built against glibc < 2.34 bind dlsym@GLIBC_2.2.5; newer ones dlsym@GLIBC_2.34. This
// program references both (the old one through a .symver alias) and must get the shim's routing from
// each: the workload runs on entry points from the old version; the new one must agree on every name.
#include "common.h"

extern "C" void* dlsym_old(void* handle, const char* name);
__asm__(".symver dlsym_old, dlsym@GLIBC_2.2.5");

int main(int argc, char** argv) {
  bool shim = preload::has_arg(argc, argv, "--shim");
  size_t n = 64 * 1024;

  void* old_fn = reinterpret_cast<void*>(&dlsym_old);
  void* new_fn = reinterpret_cast<void*>(&dlsym);
  if (shim) {
    CHECK(old_fn != new_fn);  // two exports, one per version node (glibc itself aliases them)
    CHECK(preload::in_shim(old_fn));
    CHECK(preload::in_shim(new_fn));
  } else {
    CHECK(std::strstr(preload::object_of(old_fn), "libc.so"));
    CHECK(std::strstr(preload::object_of(new_fn), "libc.so"));
  }

  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(h);
  auto calls = reinterpret_cast<fake_cuda_calls_fn>(dlsym_old(h, "fake_cuda_calls"));
  CHECK(calls);

  preload::Api api;
  preload::fill_api(&api, false, shim, [&](const char*, int, const char* impl) {
    void* p = dlsym_old(h, impl);
    CHECK(p == dlsym(h, impl));
    return p;
  });
  preload::fill_api(&api, true, shim, [&](const char*, int, const char* impl) {
    void* p = dlsym_old(h, impl);
    CHECK(p == dlsym(h, impl));
    return p;
  });
  CHECK(dlsym_old(h, "cuNoSuchEntryPoint") == nullptr);

  preload::run_workload_checked(api, n, calls, true);  // per-thread forms, from the second fill
  std::printf("old_dlsym: ok\n");
  return 0;
}
