#pragma once
// Call sites of large allocations: a backtrace taken in the hook (libunwind's unw_backtrace, loaded
// with dlopen RTLD_LOCAL so that its _Unwind_* and backtrace never interpose the program's),
// deduplicated by hash into a small fixed table whose index is the site id. Symbolising (dladdr,
// __cxa_demangle) happens in the writer, never in the hook. Without libunwind (GMS_HAVE_LIBUNWIND
// 0, or libunwind.so.8 not loadable) capture() returns 0 and nothing else changes.
#include <cstdint>

namespace gms::trace {
class Out;
}

namespace gms::trace::sites {

constexpr uint32_t kCapacity = 2048;  // distinct sites; later ones get no id
constexpr int kMaxFrames = 24;

// From configure: loads libunwind when `threshold` is not 0. Idempotent.
void configure(uint64_t threshold);
// The allocation size from which sites are taken; 0 when off or unavailable.
uint64_t threshold();
// In the hook: the site id of the caller's stack (shim frames skipped), 0 if none.
uint32_t capture();

// Writer side (under the writer's lock): writes the `site` line of `id` unless this file has it.
void write_once(Out& out, uint32_t id);
// A fork child writes its own file: every site is new there.
void forget_written();

}  // namespace gms::trace::sites
