#pragma once
// Renderings of the options table (shim/core/options.def): plain text for people, Markdown for the
// README, generated so that the documentation cannot drift from the parsers.
#include <string>

#include "core/options.h"

namespace gms::tools {

std::string options_as_text(const OptionInfo* table, size_t count);

// A GitHub-flavoured Markdown table: Variable, Default, Accepted, What it does.
std::string options_as_markdown(const OptionInfo* table, size_t count);

// A table cell: '|' would end the cell and a newline the row, so they are escaped / flattened.
std::string markdown_cell(const std::string& text);

}  // namespace gms::tools
