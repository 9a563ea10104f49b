// `gpumemshim run`: checks every option, then runs a command with the shim preloaded.
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "option_check.h"
#include "preload.h"
#include "run_summary.h"
#include "spawn.h"

extern char** environ;

namespace gms::tools {
namespace {

// What the command line asks for. `env` keeps the command-line order: a later setting wins.
struct RunRequest {
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> command;
};

// A usage error: one line, then a pointer to the help.
int usage_error(const std::string& message) {
  std::fprintf(stderr, "gpumemshim run: %s\nTry 'gpumemshim run --help'.\n", message.c_str());
  return kExitUsage;
}

// A bad value: one line naming the option, the value, what was wrong and the accepted forms.
int invalid_value(const std::string& what, const std::string& value, const std::string& variable) {
  const OptionInfo* info = find_option(variable);
  std::string why;
  value_is_valid(variable, value, &why);
  std::fprintf(stderr, "gpumemshim run: %s '%s' is not valid (%s%s%s accepts: %s)\n", what.c_str(), value.c_str(),
               why.c_str(), why.empty() ? "" : "; ", variable.c_str(), info ? info->accepted : "?");
  return kExitUsage;
}

// The flags come from the options table, so the help does too.
void print_option_flags() {
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  for (size_t i = 0; i < count; ++i) {
    const OptionInfo& o = table[i];
    if (std::string(o.name) == "GPUMEMSHIM_STATS") {
      std::printf("  %-24s sets %s: alone, a statistics table on stderr at exit;\n", "--stats[=FILE]", o.name);
      std::printf("  %-24s =FILE, JSON written to FILE (%%p = pid); =json, JSON on stderr\n", "");
      continue;
    }
    if (std::string(o.name) == "GPUMEMSHIM_TRACE_FAULTS") {
      std::printf("  %-24s sets %s=1: page faults in the trace too\n", "--faults", o.name);
    }
    std::string usage = flag_for(o) + " VALUE";
    std::printf("  %-24s sets %s (default %s)\n", usage.c_str(), o.name, *o.default_value ? o.default_value : "empty");
    std::printf("  %-24s %s\n", "", o.accepted);
  }
  if (option_for_flag("limit")) std::printf("  %-24s same as --device-limit\n", "--limit VALUE");
}

void print_run_help() {
  std::printf(
      "Usage: gpumemshim run [OPTIONS] -- COMMAND [ARGS...]\n\n"
      "Runs COMMAND with libgpumemshim.so preloaded (prepended to LD_PRELOAD) and returns its exit\n"
      "status: 128+N if it was killed by signal N, 127 if it could not be executed. Every option is\n"
      "checked before anything starts; a bad one stops here with exit status 2. SIGINT, SIGTERM,\n"
      "SIGHUP and SIGQUIT sent to gpumemshim are passed on to COMMAND.\n\n"
      "Options (each sets one GPUMEMSHIM_* variable; --name=VALUE works too):\n");
  print_option_flags();
  std::printf(
      "  %-24s sets any variable for COMMAND (GPUMEMSHIM_* values are checked)\n"
      "  %-24s this help\n\n"
      "GPUMEMSHIM_* variables already in the environment are checked the same way and passed on;\n"
      "the options above override them. 'gpumemshim options' says what each variable does.\n",
      "--env NAME=VALUE", "-h, --help");
}

// The value of a flag that always takes one: inline ("--log=info") or the next argument.
bool take_value(int argc, char** argv, int* i, bool has_inline, std::string* value) {
  if (has_inline) return true;
  // "--log -- cmd" forgot the value: "--" is never taken as one.
  if (*i + 1 >= argc || std::string(argv[*i + 1]) == "--") return false;
  *value = argv[++*i];
  return true;
}

// A relative path is made absolute: the shim writes it later, from whatever directory the program
// (or one of its children) has moved to by then.
std::string absolute_path(const std::string& value) {
  if (value.empty() || value[0] == '/') return value;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof(cwd))) return value;
  return std::string(cwd) + "/" + value;
}

std::string absolute_stats_value(const std::string& value) {
  StatsTarget target;
  if (!parse_value(value.c_str(), &target) || target.kind != StatsTarget::Kind::json_file) return value;
  return absolute_path(value);
}

// --stats alone means text on stderr, so a following word is never its value: it may be the command.
int parse_stats(const std::string& value, bool has_inline, RunRequest* req) {
  std::string v = has_inline ? value : "text";
  if (!value_is_valid("GPUMEMSHIM_STATS", v)) return invalid_value("--stats", v, "GPUMEMSHIM_STATS");
  req->env.emplace_back("GPUMEMSHIM_STATS", absolute_stats_value(v));
  return -1;
}

int parse_env(int argc, char** argv, int* i, std::string value, bool has_inline, RunRequest* req) {
  if (!take_value(argc, argv, i, has_inline, &value)) return usage_error("--env needs NAME=VALUE");
  size_t eq = value.find('=');
  if (eq == 0 || eq == std::string::npos) return usage_error("--env '" + value + "' is not NAME=VALUE");
  std::string name = value.substr(0, eq), v = value.substr(eq + 1);
  if (find_option(name) && !value_is_valid(name, v)) return invalid_value("--env " + name, v, name);
  req->env.emplace_back(name, v);
  return -1;
}

// Parses one option at argv[*i]. Returns -1 to go on, or an exit status.
int parse_one_option(int argc, char** argv, int* i, RunRequest* req) {
  std::string arg = argv[*i];
  size_t eq = arg.find('=');
  std::string flag = arg.substr(0, eq);
  bool has_inline = eq != std::string::npos;
  std::string value = has_inline ? arg.substr(eq + 1) : "";
  if (flag == "--stats") return parse_stats(value, has_inline, req);
  if (flag == "--env") return parse_env(argc, argv, i, value, has_inline, req);
  if (flag == "--faults" && !has_inline) {  // a switch: a following word is never its value
    req->env.emplace_back("GPUMEMSHIM_TRACE_FAULTS", "1");
    return -1;
  }
  const OptionInfo* option = flag.rfind("--", 0) == 0 ? option_for_flag(flag.substr(2)) : nullptr;
  if (!option) return usage_error("unknown option '" + arg + "'");
  if (!take_value(argc, argv, i, has_inline, &value)) return usage_error(flag + " needs a value");
  if (!value_is_valid(option->name, value)) return invalid_value(flag, value, option->name);
  if (std::string(option->name) == "GPUMEMSHIM_TRACE") value = absolute_path(value);
  req->env.emplace_back(option->name, value);
  return -1;
}

// Parses everything after "run". Returns -1 on success, or an exit status.
int parse_run_args(int argc, char** argv, RunRequest* req) {
  int i = 1;
  for (; i < argc; ++i) {
    if (std::string(argv[i]) == "--") break;
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") return print_run_help(), 0;
    if (argv[i][0] != '-') return usage_error("'" + std::string(argv[i]) + "': put '--' before the command");
    int status = parse_one_option(argc, argv, &i, req);
    if (status >= 0) return status;
  }
  if (i >= argc) return usage_error("missing '-- COMMAND'");
  for (++i; i < argc; ++i) req->command.push_back(argv[i]);
  if (req->command.empty()) return usage_error("missing the command after '--'");
  return -1;
}

// Refuses invalid GPUMEMSHIM_* values in the environment the child would get (the command line's
// values are in it already and were checked above, so what fails here came from outside).
bool environment_is_valid() {
  bool ok = true;
  for (const EnvProblem& p : check_environment(environ)) {
    if (!p.fatal) continue;  // unknown names: the shim warns about them itself, in the child
    std::fprintf(stderr, "gpumemshim run: in the environment: %s\n", p.line.c_str());
    ok = false;
  }
  return ok;
}

// A directory that cannot take a file the shim writes later (statistics at exit, the trace at the
// first event) is better found now. Paths with a pattern in the directory part are left to the shim.
bool directory_is_writable(const char* variable, const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (dir.find('%') != std::string::npos || access(dir.c_str(), W_OK | X_OK) == 0) return true;
  std::fprintf(stderr, "gpumemshim run: %s='%s': cannot write into directory '%s' (%s)\n", variable, path.c_str(),
               dir.c_str(), strerror(errno));
  return false;
}

bool stats_directory_is_writable() {
  const char* value = getenv("GPUMEMSHIM_STATS");
  StatsTarget target;
  if (!value || !parse_value(value, &target) || target.kind != StatsTarget::Kind::json_file) return true;
  return directory_is_writable("GPUMEMSHIM_STATS", target.path);
}

bool trace_directory_is_writable() {
  const char* value = getenv("GPUMEMSHIM_TRACE");
  return !value || !*value || directory_is_writable("GPUMEMSHIM_TRACE", value);
}

// Finds the shim next to this command and puts it first in LD_PRELOAD.
bool set_preload() {
  std::vector<std::string> candidates = shim_candidates(self_directory());
  std::string shim = find_shim(candidates);
  if (shim.empty()) {
    std::string looked;
    for (const std::string& c : candidates) looked += (looked.empty() ? "" : ", ") + c;
    std::fprintf(stderr, "gpumemshim run: cannot find %s (looked in: %s); reinstall gpumemshim or rebuild it\n",
                 kShimFileName, looked.empty() ? "nowhere: /proc/self/exe is unreadable" : looked.c_str());
    return false;
  }
  if (!preload_safe_path(shim)) {
    std::fprintf(stderr, "gpumemshim run: %s cannot go into LD_PRELOAD: its path contains a space or a colon\n",
                 shim.c_str());
    return false;
  }
  const char* existing = getenv("LD_PRELOAD");
  setenv("LD_PRELOAD", prepend_preload(shim, existing ? existing : "").c_str(), 1);
  return true;
}

int run_child(const RunRequest& req) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  double started = static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
  ChildResult child = spawn_and_wait(req.command);
  if (!child.started) {
    std::fprintf(stderr, "gpumemshim run: cannot execute '%s': %s\n", req.command[0].c_str(),
                 strerror(child.exec_errno));
    return kExitCannotRun;
  }
  int code = exit_code_of(child.wait_status);
  const char* stats = getenv("GPUMEMSHIM_STATS");
  const char* trace = getenv("GPUMEMSHIM_TRACE");
  print_closing_summary(RunOutcome{child, code, stats ? stats : "", trace ? trace : "", started});
  return code;
}

}  // namespace

int run_command(int argc, char** argv) {
  RunRequest req;
  int status = parse_run_args(argc, argv, &req);
  if (status >= 0) return status;
  for (const auto& [name, value] : req.env) setenv(name.c_str(), value.c_str(), 1);
  if (!environment_is_valid() || !stats_directory_is_writable() || !trace_directory_is_writable()) return kExitUsage;
  if (!set_preload()) return kExitUsage;
  return run_child(req);
}

}  // namespace gms::tools
