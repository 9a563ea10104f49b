// (d) dlsym(RTLD_NEXT, ...): from the program itself (the objects after it: the preloaded shim
// first, then libnext_user, libcuda, libc), and from a library that sits between the program and
// libcuda (after it: libcuda, libc). Both must end in the shim's hooks for driver entry points.
// libc names too: from the program, "malloc" is the shim's hook (host blocks are tracked); from the
// library, which comes after the shim, it is libc's own (not tracked: the shim is not "next").
//
// The standard workload runs twice: through the program's lookups, then through the library's.
// Host blocks: 2 MiB malloc + free, 3 MiB calloc + free, realloc of the 2 MiB... see the runner.
#include "common.h"

extern "C" void* next_user_lookup(const char* name);

using malloc_fn = void* (*)(size_t);
using calloc_fn = void* (*)(size_t, size_t);
using realloc_fn = void* (*)(void*, size_t);
using free_fn = void (*)(void*);

int main(int argc, char** argv) {
  bool shim = preload::has_arg(argc, argv, "--shim");
  bool sanitizer_malloc = preload::has_arg(argc, argv, "--sanitizer-malloc");
  size_t n = 64 * 1024;
  constexpr size_t MiB = 1 << 20;

  // Driver entry points, from the program.
  preload::Api mine;
  preload::fill_api(&mine, false, shim, [](const char*, int, const char* impl) { return dlsym(RTLD_NEXT, impl); });
  // ... and from the library in between.
  preload::Api lib;
  preload::fill_api(&lib, false, shim, [](const char*, int, const char* impl) { return next_user_lookup(impl); });
  for (const char* name : {"cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuLaunchKernel"}) {
    CHECK(dlsym(RTLD_NEXT, name) == next_user_lookup(name));
  }
  CHECK(dlsym(RTLD_NEXT, "cuNoSuchEntryPoint") == nullptr);

  preload::CallSnapshot before = preload::snapshot(&fake_cuda_calls, false);
  preload::run_workload(mine, n);
  preload::run_workload(lib, n);
  preload::check_calls_since(before, &fake_cuda_calls, false, 2);

  // libc names, from the program: the next definition after the program is the shim's (or the
  // sanitizer runtime's, which is preloaded before it).
  auto my_malloc = reinterpret_cast<malloc_fn>(dlsym(RTLD_NEXT, "malloc"));
  auto my_calloc = reinterpret_cast<calloc_fn>(dlsym(RTLD_NEXT, "calloc"));
  auto my_realloc = reinterpret_cast<realloc_fn>(dlsym(RTLD_NEXT, "realloc"));
  auto my_free = reinterpret_cast<free_fn>(dlsym(RTLD_NEXT, "free"));
  CHECK(my_malloc && my_calloc && my_realloc && my_free);
  if (shim && !sanitizer_malloc) {
    CHECK(preload::in_shim(reinterpret_cast<void*>(my_malloc)));
    CHECK(preload::in_shim(reinterpret_cast<void*>(my_free)));
  }
  auto* a = static_cast<unsigned char*>(my_malloc(2 * MiB));            // host block 2 MiB
  CHECK(a);
  std::memset(a, 0x5a, 2 * MiB);
  a = static_cast<unsigned char*>(my_realloc(a, 4 * MiB));              // -2 MiB, +4 MiB
  CHECK(a && a[2 * MiB - 1] == 0x5a);
  auto* b = static_cast<unsigned char*>(my_calloc(3, MiB));             // host block 3 MiB
  CHECK(b && b[3 * MiB - 1] == 0);
  my_free(a);                                                           // -4 MiB
  my_free(b);                                                           // -3 MiB

  // From the library: libc's own allocator, after the shim in the search order: not tracked.
  auto lib_malloc = reinterpret_cast<malloc_fn>(next_user_lookup("malloc"));
  auto lib_free = reinterpret_cast<free_fn>(next_user_lookup("free"));
  CHECK(lib_malloc && lib_free);
  if (shim) CHECK(!preload::in_shim(reinterpret_cast<void*>(lib_malloc)));
  void* c = lib_malloc(5 * MiB);
  CHECK(c);
  std::memset(c, 1, 5 * MiB);
  lib_free(c);

  std::printf("rtld_next: ok\n");
  return 0;
}
