#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace gms::tools {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

std::atomic<pid_t> g_child{-1};

void forward_signal(int sig, siginfo_t* info, void*) {
  // A signal raised by the terminal (Ctrl-C, Ctrl-\, hang-up) goes to the whole foreground process
  // group, child included: sending it again would deliver it twice. Only signals aimed at this
  // process alone (kill, a batch scheduler) need passing on.
  if (info && info->si_code == SI_KERNEL) return;
  pid_t child = g_child.load();
  if (child > 0) kill(child, sig);
}

sigset_t forwarded_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwarded) sigaddset(&set, s);
  return set;
}

// Installs the forwarder for every forwarded signal that is not ignored: a signal ignored when we
// started (nohup, a background job) stays ignored, as it does for the child.
void install_forwarders() {
  for (int s : kForwarded) {
    struct sigaction old {};
    sigaction(s, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(s, &sa, nullptr);
  }
}

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// In the child, after fork: only async-signal-safe calls until exec. On failure, errno goes back
// through the close-on-exec pipe, which tells the parent "never started" apart from "exited 127".
[[noreturn]] void exec_child(char* const* argv, const sigset_t* old_mask, const struct sigaction* old_chld,
                             int report_fd) {
  sigaction(SIGCHLD, old_chld, nullptr);
  sigprocmask(SIG_SETMASK, old_mask, nullptr);
  execvp(argv[0], argv);
  int err = errno;
  ssize_t ignored = write(report_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

// Reads the child's exec errno, or 0 once exec succeeded (the pipe closed with nothing in it).
int read_exec_errno(int fd) {
  int err = 0;
  ssize_t n;
  do {
    n = read(fd, &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof(err)) ? err : 0;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 0;
  }
  return status;
}

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const std::string& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

ChildResult spawn_and_wait(const std::vector<std::string>& argv) {
  ChildResult r;
  std::vector<char*> args = c_argv(argv);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return r.exec_errno = errno, r;

  // Signals stay blocked from before fork until the forwarder knows the child's pid, so that none
  // is lost or kills us in between; the child restores the original mask before exec.
  sigset_t block = forwarded_set(), old_mask;
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  // With SIGCHLD ignored (inherited from whoever started us) the kernel reaps the child by itself and
  // its exit status is lost; the child gets the inherited disposition back before exec.
  struct sigaction dfl {}, old_chld {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, &old_chld);
  double start = now_seconds();
  pid_t pid = fork();
  if (pid == 0) exec_child(args.data(), &old_mask, &old_chld, pipefd[1]);
  close(pipefd[1]);
  if (pid < 0) {
    r.exec_errno = errno;
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    close(pipefd[0]);
    return r;
  }
  g_child.store(pid);
  install_forwarders();
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  r.pid = pid;
  r.exec_errno = read_exec_errno(pipefd[0]);
  close(pipefd[0]);
  r.wait_status = wait_for(pid);
  r.wall_seconds = now_seconds() - start;
  r.started = r.exec_errno == 0;
  g_child.store(-1);
  return r;
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace gms::tools
