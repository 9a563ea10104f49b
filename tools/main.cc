// `gpumemshim`: the command-line face of the shim. Dispatches to one subcommand per file.
#include <cstdio>
#include <cstring>

#include "cli.h"
#include "gms/build_config.h"

namespace {

using Subcommand = int (*)(int, char**);

struct Entry {
  const char* name;
  Subcommand run;
  const char* summary;
};

constexpr Entry kSubcommands[] = {
    {"run", gms::tools::run_command, "run a command with the shim preloaded"},
    {"doctor", gms::tools::doctor_command, "show what this machine offers the shim (driver, GPUs, CUPTI)"},
    {"options", gms::tools::options_command, "list every GPUMEMSHIM_* variable"},
    {"report", gms::tools::report_command, "turn traces into tables, JSON, a Perfetto timeline or an HTML page"},
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "Usage: gpumemshim COMMAND [ARGS...]\n"
               "       gpumemshim run [--policy P] [--stats[=FILE]] [--log LEVEL] [--env NAME=VALUE]... -- cmd args...\n\n"
               "Commands:\n");
  for (const Entry& e : kSubcommands) std::fprintf(out, "  %-9s %s\n", e.name, e.summary);
  std::fprintf(out,
               "\n'gpumemshim COMMAND --help' tells more about each. Other options:\n"
               "  -h, --help     this help\n"
               "  --version      print the version\n");
}

int usage_error(const char* message, const char* what) {
  std::fprintf(stderr, "gpumemshim: %s%s\n\n", message, what);
  print_usage(stderr);
  return gms::tools::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage_error("missing command", "");
  const char* first = argv[1];
  if (!std::strcmp(first, "-h") || !std::strcmp(first, "--help") || !std::strcmp(first, "help")) {
    // "gpumemshim help run" is the same as "gpumemshim run --help".
    if (argc < 3) return print_usage(stdout), 0;
    static char help_flag[] = "--help";
    char* args[] = {argv[2], help_flag, nullptr};
    for (const Entry& e : kSubcommands) {
      if (!std::strcmp(argv[2], e.name)) return e.run(2, args);
    }
    return usage_error("unknown command: ", argv[2]);
  }
  if (!std::strcmp(first, "--version")) return std::printf("gpumemshim %s\n", GMS_VERSION), 0;
  for (const Entry& e : kSubcommands) {
    if (!std::strcmp(first, e.name)) return e.run(argc - 1, argv + 1);
  }
  return usage_error("unknown command: ", first);
}
