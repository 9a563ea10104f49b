#pragma once
// The sections of `gpumemshim doctor`. Everything CUDA is reached through dlopen/dlsym, never linked:
// the command must run, and say something useful, on a machine without a driver.
#include <string>
#include <vector>

namespace gms::tools {

// Prints the driver section and one block per GPU. Returns false if no driver could be loaded.
bool print_driver_section();

// Prints the CUDA runtime and CUPTI sections.
void print_toolkit_sections();

// Loads the first of `names` that dlopen accepts; returns the handle (or nullptr) and, in *error,
// the last dlopen error, for a "not loadable" line.
void* dlopen_first(const std::vector<std::string>& names, std::string* error);

// The file a loaded symbol came from (dladdr), or "?".
std::string library_path_of(void* symbol);

}  // namespace gms::tools
