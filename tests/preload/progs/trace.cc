// (l) The trace collector (GPUMEMSHIM_TRACE): programs whose trace the runner checks line by line.
//   trace                 the standard workload (n = 64 KiB)
//   trace --fork          the workload; a fork child (no exec) runs it with n = 128 KiB and exits
//                         normally; then the parent allocates and frees 32 KiB. Prints child_pid=N.
//   trace --flush PATH    the workload, gpumemshim_trace_flush(), then the number of lines in PATH
//                         (lines_after_flush=N), and _exit: no destructor, so no `end` line.
//   trace --sites         2 MiB device allocations from two call sites (site_a three times, site_b
//                         once) and one of 4 KiB, each freed at once.
//   trace --spill         cuMemAlloc of 512 KiB, then of 1 MiB (spilled under POLICY=spill and a
//                         1 MiB DEVICE_LIMIT), both freed.
//   trace --managed       cuMemAllocManaged of 8 MiB, the first traced call, written by the CPU and
//                         freed (the stand-in CUPTI, fake_cupti.cc, hands over its records).
// The program is linked with -rdynamic so that dladdr can name site_a and site_b.
#include <sys/wait.h>
#include <cstring>
#include <unistd.h>

#include "common.h"

namespace {

void alloc_free(size_t n) {
  CUdeviceptr p = 0;
  CK(cuMemAlloc(&p, n));
  CK(cuMemsetD8(p, 1, n));
  CK(cuMemFree(p));
}

}  // namespace

// Two distinct call sites of the same allocation: exported (-rdynamic) and never inlined.
extern "C" __attribute__((noinline)) void site_a(size_t n) {
  alloc_free(n);
  asm volatile("");
}
extern "C" __attribute__((noinline)) void site_b(size_t n) {
  alloc_free(n);
  asm volatile("");
}

int main(int argc, char** argv) {
  if (preload::has_arg(argc, argv, "--fork")) {
    preload::run_workload(preload::Linked{}, 64 * 1024);
    std::fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
      preload::run_workload(preload::Linked{}, 128 * 1024);
      std::exit(0);  // destructors run: the child ends its own trace
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    alloc_free(32 * 1024);
    std::printf("child_pid=%d\ntrace: ok\n", static_cast<int>(child));
    return 0;
  }
  if (preload::has_arg(argc, argv, "--flush")) {
    const char* path = argv[argc - 1];
    preload::run_workload(preload::Linked{}, 64 * 1024);
    auto flush = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "gpumemshim_trace_flush"));
    int rc = flush ? flush() : -2;
    std::FILE* f = std::fopen(path, "r");
    int lines = 0;
    if (f) {
      for (int c; (c = std::fgetc(f)) != EOF;) lines += c == '\n';
      std::fclose(f);
    }
    std::printf("flush_rc=%d\nlines_after_flush=%d\ntrace: ok\n", rc, lines);
    std::fflush(stdout);
    _exit(0);
  }
  if (preload::has_arg(argc, argv, "--sites")) {
    preload::use_device0();
    volatile int times = 3;  // not unrolled: one call instruction, one call site
    for (int i = 0; i < times; ++i) site_a(2 << 20);
    site_b(2 << 20);
    alloc_free(4096);
    std::printf("trace: ok\n");
    return 0;
  }
  if (preload::has_arg(argc, argv, "--managed")) {
    preload::use_device0();
    CUdeviceptr m = 0;
    CK(cuMemAllocManaged(&m, 8 << 20, CU_MEM_ATTACH_GLOBAL));
    std::memset(reinterpret_cast<void*>(m), 7, 8 << 20);
    CK(cuMemFree(m));
    std::printf("trace: ok\n");
    return 0;
  }
  if (preload::has_arg(argc, argv, "--spill")) {
    preload::use_device0();
    CUdeviceptr a = 0, b = 0;
    CK(cuMemAlloc(&a, 512 * 1024));
    CK(cuMemAlloc(&b, 1024 * 1024));
    CK(cuMemsetD8(b, 3, 1024 * 1024));
    CK(cuMemFree(b));
    CK(cuMemFree(a));
    std::printf("trace: ok\n");
    return 0;
  }
  preload::run_workload(preload::Linked{}, 64 * 1024);
  std::printf("trace: ok\n");
  return 0;
}
