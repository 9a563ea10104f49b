#pragma once
// Checks GPUMEMSHIM_* values with the shim's own parsers (gms_core), so that the command refuses
// exactly what the shim would refuse, before anything is started.
#include <string>
#include <vector>

#include "core/options.h"

namespace gms::tools {

// The table entry for a full variable name ("GPUMEMSHIM_POLICY"), or nullptr if it is not an option.
const OptionInfo* find_option(const std::string& variable);

// True if `value` is accepted by the shim's parser for `variable` (which must be a known option),
// range included; when it is not, *why says what was wrong beyond the accepted forms (or is empty).
bool value_is_valid(const std::string& variable, const std::string& value, std::string* why = nullptr);
// "NAME='VALUE' is not valid (why; accepted: ...)": the one line for a refused value.
std::string invalid_value_line(const std::string& variable, const std::string& value);

// Every option has a flag of its own, derived from its name: GPUMEMSHIM_DEVICE_LIMIT is
// --device-limit. A new line in options.def is a new flag of `gpumemshim run`, with nothing to add.
std::string flag_for(const OptionInfo& option);

// The option a flag name (without the leading "--") sets, or nullptr. Also knows the short aliases
// (--limit for --device-limit), which only exist while their option does.
const OptionInfo* option_for_flag(const std::string& flag_name);

// One problem found in an environment block.
struct EnvProblem {
  bool fatal;        // an invalid value (the shim would fall back to pass-through) vs. an unknown name
  std::string line;  // names the variable, the value and the accepted forms
};

// Checks every GPUMEMSHIM_* entry of `env` (NAME=VALUE strings, nullptr-terminated).
std::vector<EnvProblem> check_environment(char* const* env);

}  // namespace gms::tools
