// (g) fork. The parent runs the standard workload (n = 64 KiB), then, while a second thread
// allocates and frees 2 MiB host blocks (kBgIters times), forks kForks children that only use
// malloc/free (8 MiB, realloc'd to 16 MiB) and exit normally: they must neither deadlock on the
// shim's locks nor write statistics (they made no CUDA call). Then it forks a child that execs this
// program with --child: that process runs the workload with n = 128 KiB and writes its own
// statistics file (%p). Prints "bg_iters=N", "exec_child_pid=N" and "fork_child_pids=A,B,..." for
// the runner (the background thread runs until the forks are done, so N varies from run to run;
// under a sanitizer's malloc it stops before them).
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "common.h"

namespace {

constexpr int kForks = 8;
constexpr int kBgMinIters = 100;
constexpr size_t MiB = 1 << 20;

std::atomic<bool> g_bg_started{false};
std::atomic<bool> g_bg_stop{false};
long g_bg_iters = 0;

void* background(void*) {
  while (g_bg_iters < kBgMinIters || !g_bg_stop.load()) {
    auto* p = static_cast<unsigned char*>(std::malloc(2 * MiB));
    CHECK(p);
    p[0] = p[2 * MiB - 1] = 1;
    g_bg_started.store(true);
    std::free(p);
    ++g_bg_iters;
  }
  return nullptr;
}

int wait_for(pid_t pid) {
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  if (preload::has_arg(argc, argv, "--child")) {
    preload::run_workload(preload::Linked{}, 128 * 1024);
    std::printf("exec child: ok\n");
    return 0;
  }
  preload::run_workload(preload::Linked{}, 64 * 1024);

  pthread_t bg;
  CHECK(pthread_create(&bg, nullptr, background, nullptr) == 0);
  while (!g_bg_started.load()) {
  }
  // Under a sanitizer's malloc the shim sees no host block, and the forks would only test that
  // allocator, which GCC 12's AddressSanitizer does not make fork-safe: a child's malloc can spin
  // forever on the large-block lock the other thread held at the fork. So the other thread is done
  // before the forks; with the shim's malloc it runs through them.
  const bool quiet_forks = preload::has_arg(argc, argv, "--sanitizer-malloc");
  if (quiet_forks) {
    g_bg_stop.store(true);
    CHECK(pthread_join(bg, nullptr) == 0);
  }
  pid_t kids[kForks];
  for (int i = 0; i < kForks; ++i) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      // The child: only the allocator. The other thread does not exist here; whatever lock it held
      // at the fork must not be held in the child.
      auto* p = static_cast<unsigned char*>(std::malloc(8 * MiB));
      if (!p) _exit(3);
      std::memset(p, 0x11, 8 * MiB);
      auto* q = static_cast<unsigned char*>(std::realloc(p, 16 * MiB));
      if (!q || q[8 * MiB - 1] != 0x11) _exit(4);
      std::free(q);
      std::exit(0);  // normal exit: destructors run, the shim decides whether to write statistics
    }
    kids[i] = pid;
  }
  for (int i = 0; i < kForks; ++i) CHECK(wait_for(kids[i]) == 0);
  if (!quiet_forks) {
    g_bg_stop.store(true);
    CHECK(pthread_join(bg, nullptr) == 0);
  }

  std::fflush(stdout);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0) _exit(5);
    self[len] = '\0';
    if (preload::has_arg(argc, argv, "--shim")) {
      execl(self, self, "--child", "--shim", static_cast<char*>(nullptr));
    } else {
      execl(self, self, "--child", static_cast<char*>(nullptr));
    }
    _exit(6);
  }
  CHECK(wait_for(child) == 0);

  std::printf("bg_iters=%ld\n", g_bg_iters);
  std::printf("exec_child_pid=%d\n", static_cast<int>(child));
  std::printf("fork_child_pids=");
  for (int i = 0; i < kForks; ++i) std::printf("%s%d", i ? "," : "", static_cast<int>(kids[i]));
  std::printf("\nfork: ok\n");
  return 0;
}
