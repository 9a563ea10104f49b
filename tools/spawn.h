#pragma once
// Runs a command as a child, passing on the signals meant for it, and waits for it.
#include <sys/types.h>

#include <string>
#include <vector>

namespace gms::tools {

struct ChildResult {
  bool started = false;    // false: the command could not be executed (exec_errno says why)
  int exec_errno = 0;
  pid_t pid = -1;
  int wait_status = 0;     // as from waitpid
  double wall_seconds = 0;
};

// fork + execvp(argv[0], argv) with the current environment; SIGINT, SIGTERM, SIGHUP and SIGQUIT sent
// to this process are forwarded to the child while it runs.
ChildResult spawn_and_wait(const std::vector<std::string>& argv);

// The shell's convention for a wait status: the exit code, or 128 + signal number.
int exit_code_of(int wait_status);

}  // namespace gms::tools
