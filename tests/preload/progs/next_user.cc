// A library loaded between the program and libcuda (like a profiler or an allocator wrapper): it
// looks entry points up with dlsym(RTLD_NEXT, ...) from its own code, so "next" means after it.
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) void* next_user_lookup(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  // Not a tail call: dlsym takes "the caller" from its return address, which must be in here.
  __asm__ volatile("" : "+r"(p));
  return p;
}
