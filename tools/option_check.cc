#include "option_check.h"

#include <cstring>

namespace gms::tools {
namespace {

constexpr const char kPrefix[] = "GPUMEMSHIM_";

// Short names people will type, from the design's examples ("run --policy spill --limit 8G").
constexpr struct {
  const char* flag_name;
  const char* variable;
} kAliases[] = {
    {"limit", "GPUMEMSHIM_DEVICE_LIMIT"},
};

}  // namespace

const OptionInfo* find_option(const std::string& variable) {
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  for (size_t i = 0; i < count; ++i) {
    if (variable == table[i].name) return &table[i];
  }
  return nullptr;
}

std::string flag_for(const OptionInfo& option) {
  std::string flag = "--";
  for (const char* c = option.name + sizeof(kPrefix) - 1; *c; ++c) {
    flag += *c == '_' ? '-' : static_cast<char>(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
  }
  return flag;
}

const OptionInfo* option_for_flag(const std::string& flag_name) {
  for (const auto& a : kAliases) {
    if (flag_name == a.flag_name) return find_option(a.variable);
  }
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  for (size_t i = 0; i < count; ++i) {
    if (flag_for(table[i]) == "--" + flag_name) return &table[i];
  }
  return nullptr;
}

bool value_is_valid(const std::string& variable, const std::string& value, std::string* why) {
  // The shim's own check, range included (core/options.cc): a new option in options.def is checked
  // here without touching this file.
  const char* reason = nullptr;
  bool ok = check_option_value(variable.c_str(), value.c_str(), &reason);
  if (why) *why = reason ? reason : "";
  return ok;
}

std::string invalid_value_line(const std::string& variable, const std::string& value) {
  std::string why;
  value_is_valid(variable, value, &why);
  const OptionInfo* info = find_option(variable);
  return variable + "='" + value + "' is not valid (" + (why.empty() ? "" : why + "; ") +
         "accepted: " + (info ? info->accepted : "?") + ")";
}

std::vector<EnvProblem> check_environment(char* const* env) {
  std::vector<EnvProblem> problems;
  for (char* const* e = env; e && *e; ++e) {
    if (std::strncmp(*e, kPrefix, sizeof(kPrefix) - 1) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    if (std::string(*e, static_cast<size_t>(eq - *e)) == kReportedVariable) continue;  // the shim's own mark
    std::string name(*e, static_cast<size_t>(eq - *e));
    std::string value(eq + 1);
    const OptionInfo* info = find_option(name);
    if (!info) {
      // Same leniency as the shim: a misspelt name is worth a warning, not a refusal to run.
      problems.push_back({false, "unknown variable " + name +
                                     " is ignored by the shim ('gpumemshim options' lists the known ones)"});
    } else if (!value_is_valid(name, value)) {
      problems.push_back({true, invalid_value_line(name, value)});
    }
  }
  return problems;
}

}  // namespace gms::tools
