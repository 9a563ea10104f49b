// `gpumemshim options`: every GPUMEMSHIM_* variable, from the shim's own table.
#include <cstdio>
#include <string>

#include "cli.h"
#include "options_text.h"

namespace gms::tools {
namespace {

void print_options_help() {
  std::printf(
      "Usage: gpumemshim options [--markdown]\n\n"
      "Lists every GPUMEMSHIM_* variable the shim reads: its default, the values it accepts and what it\n"
      "does. --markdown prints a Markdown table for README.md, to paste between the lines\n"
      "<!-- options:begin --> and <!-- options:end -->.\n");
}

}  // namespace

int options_command(int argc, char** argv) {
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return print_options_help(), 0;
    if (a == "--markdown") {
      markdown = true;
      continue;
    }
    std::fprintf(stderr, "gpumemshim options: unknown option '%s'\nTry 'gpumemshim options --help'.\n", a.c_str());
    return kExitUsage;
  }
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  std::string text = markdown ? options_as_markdown(table, count) : options_as_text(table, count);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace gms::tools
