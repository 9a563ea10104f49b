// `gpumemshim run`: checks every option, then runs a command with the shim preloaded.
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
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

// Flags that set one shim option each. Adding a flag for a new option is one line here: the value
// is checked by that option's parser and the help text takes the accepted forms from the table.
struct OptionFlag {
  const char* flag;
  const char* variable;
  const char* metavar;
};
constexpr OptionFlag kOptionFlags[] = {
    {"--policy", "GPUMEMSHIM_POLICY", "P"},
    {"--log", "GPUMEMSHIM_LOG", "LEVEL"},
};

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

// A bad value: one line naming the option, the value and the accepted forms.
int invalid_value(const std::string& what, const std::string& value, const std::string& variable) {
  const OptionInfo* info = find_option(variable);
  std::fprintf(stderr, "gpumemshim run: %s '%s' is not valid (%s accepts: %s)\n", what.c_str(), value.c_str(),
               variable.c_str(), info ? info->accepted : "?");
  return kExitUsage;
}

void print_run_help() {
  std::printf(
      "Usage: gpumemshim run [OPTIONS] -- COMMAND [ARGS...]\n\n"
      "Runs COMMAND with libgpumemshim.so preloaded (prepended to LD_PRELOAD) and returns its exit\n"
      "status: 128+N if it was killed by signal N, 127 if it could not be executed. Every option is\n"
      "checked before anything starts; a bad one stops here with exit status 2. SIGINT, SIGTERM,\n"
      "SIGHUP and SIGQUIT sent to gpumemshim are passed on to COMMAND.\n\nOptions:\n");
  for (const OptionFlag& f : kOptionFlags) {
    const OptionInfo* info = find_option(f.variable);
    std::string usage = std::string(f.flag) + " " + f.metavar;
    std::printf("  %-18s sets %s: %s (default %s)\n", usage.c_str(), f.variable, info->accepted,
                info->default_value);
  }
  std::printf(
      "  --stats[=FILE]     sets GPUMEMSHIM_STATS: alone, a statistics table on stderr at exit;\n"
      "                     =FILE, JSON written to FILE (%%p = pid); =json, JSON on stderr\n"
      "  --env NAME=VALUE   sets any variable for COMMAND (GPUMEMSHIM_* values are checked)\n"
      "  -h, --help         this help\n\n"
      "GPUMEMSHIM_* variables already in the environment are checked the same way and passed on;\n"
      "the options above override them. 'gpumemshim options' lists every variable.\n");
}

// Splits "--flag=value"; returns false if `arg` is not `flag` or `flag=...`.
bool match_flag(const std::string& arg, const std::string& flag, std::string* inline_value, bool* has_inline) {
  if (arg == flag) return *has_inline = false, true;
  if (arg.compare(0, flag.size() + 1, flag + "=") != 0) return false;
  *inline_value = arg.substr(flag.size() + 1);
  return *has_inline = true, true;
}

// The value of a flag that always takes one: inline ("--log=info") or the next argument.
bool take_value(int argc, char** argv, int* i, bool has_inline, std::string* value) {
  if (has_inline) return true;
  if (*i + 1 >= argc) return false;
  *value = argv[++*i];
  return true;
}

// A relative stats file is made absolute: the shim writes it at exit, from whatever directory the
// program (or one of its children) has moved to by then.
std::string absolute_stats_value(const std::string& value) {
  StatsTarget target;
  if (!parse_value(value.c_str(), &target) || target.kind != StatsTarget::Kind::json_file) return value;
  if (value[0] == '/') return value;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof(cwd))) return value;
  return std::string(cwd) + "/" + value;
}

// Parses one option at argv[*i]. Returns -1 to go on, or an exit status.
int parse_one_option(int argc, char** argv, int* i, RunRequest* req) {
  std::string arg = argv[*i], value;
  bool has_inline = false;
  for (const OptionFlag& f : kOptionFlags) {
    if (!match_flag(arg, f.flag, &value, &has_inline)) continue;
    if (!take_value(argc, argv, i, has_inline, &value)) return usage_error(std::string(f.flag) + " needs a value");
    if (!value_is_valid(f.variable, value)) return invalid_value(f.flag, value, f.variable);
    req->env.emplace_back(f.variable, value);
    return -1;
  }
  if (match_flag(arg, "--stats", &value, &has_inline)) {
    // "--stats FILE" is not accepted: "--stats" alone is complete, so the next word may be the command.
    if (!has_inline) value = "text";
    if (!value_is_valid("GPUMEMSHIM_STATS", value)) return invalid_value("--stats", value, "GPUMEMSHIM_STATS");
    req->env.emplace_back("GPUMEMSHIM_STATS", absolute_stats_value(value));
    return -1;
  }
  if (match_flag(arg, "--env", &value, &has_inline)) {
    if (!take_value(argc, argv, i, has_inline, &value)) return usage_error("--env needs NAME=VALUE");
    size_t eq = value.find('=');
    if (eq == 0 || eq == std::string::npos) return usage_error("--env '" + value + "' is not NAME=VALUE");
    std::string name = value.substr(0, eq), v = value.substr(eq + 1);
    if (find_option(name) && !value_is_valid(name, v)) return invalid_value("--env " + name, v, name);
    req->env.emplace_back(name, v);
    return -1;
  }
  return usage_error("unknown option '" + arg + "'");
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

// A stats file is written at exit, possibly hours later: a directory that cannot take it is better
// found now. Paths with a pattern in the directory part are left to the shim.
bool stats_directory_is_writable() {
  const char* value = getenv("GPUMEMSHIM_STATS");
  StatsTarget target;
  if (!value || !parse_value(value, &target) || target.kind != StatsTarget::Kind::json_file) return true;
  std::string path = target.path;
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (dir.find('%') != std::string::npos || access(dir.c_str(), W_OK | X_OK) == 0) return true;
  std::fprintf(stderr, "gpumemshim run: GPUMEMSHIM_STATS='%s': cannot write into directory '%s' (%s)\n", value,
               dir.c_str(), strerror(errno));
  return false;
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
  ChildResult child = spawn_and_wait(req.command);
  if (!child.started) {
    std::fprintf(stderr, "gpumemshim run: cannot execute '%s': %s\n", req.command[0].c_str(),
                 strerror(child.exec_errno));
    return kExitCannotRun;
  }
  int code = exit_code_of(child.wait_status);
  const char* stats = getenv("GPUMEMSHIM_STATS");
  print_closing_summary(RunOutcome{child, code, stats ? stats : ""});
  return code;
}

}  // namespace

int run_command(int argc, char** argv) {
  RunRequest req;
  int status = parse_run_args(argc, argv, &req);
  if (status >= 0) return status;
  for (const auto& [name, value] : req.env) setenv(name.c_str(), value.c_str(), 1);
  if (!environment_is_valid() || !stats_directory_is_writable()) return kExitUsage;
  if (!set_preload()) return kExitUsage;
  return run_child(req);
}

}  // namespace gms::tools
