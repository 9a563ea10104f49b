#include "options_text.h"

namespace gms::tools {

std::string options_as_text(const OptionInfo* table, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    const OptionInfo& o = table[i];
    if (i) out += "\n";
    out += o.name;
    out += "\n    default:  ";
    out += *o.default_value ? o.default_value : "(empty)";
    out += "\n    accepted: ";
    out += o.accepted;
    out += "\n    ";
    out += o.doc;
    out += "\n";
  }
  return out;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string options_as_markdown(const OptionInfo* table, size_t count) {
  std::string out = "| Variable | Default | Accepted | What it does |\n|---|---|---|---|\n";
  for (size_t i = 0; i < count; ++i) {
    const OptionInfo& o = table[i];
    // An empty code span would show as two backticks.
    std::string def = *o.default_value ? "`" + markdown_cell(o.default_value) + "`" : "*(empty)*";
    out += "| `" + markdown_cell(o.name) + "` | " + def + " | " +
           markdown_cell(o.accepted) + " | " + markdown_cell(o.doc) + " |\n";
  }
  return out;
}

}  // namespace gms::tools
