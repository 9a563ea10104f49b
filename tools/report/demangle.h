#pragma once
// Kernel names as CUPTI records them are mangled C++ ("_ZN2at6native29vectorized_elementwise_...").
// The report shows them demangled and shortened to the function's name; JSON keeps both forms.
#include <cstddef>
#include <string>
#include <string_view>

namespace gms::report {

// The demangled name (abi::__cxa_demangle), or `name` itself when it is not a mangled C++ name.
std::string demangle(std::string_view name);

// A demangled name readable within `width` characters: the return type goes, then the parameter
// list becomes "(...)", then template arguments "<...>", and last the scope is cut from the front
// ("...::kernel<...>(...)"): the function's own name stays.
std::string short_name(std::string_view demangled, size_t width);

}  // namespace gms::report
