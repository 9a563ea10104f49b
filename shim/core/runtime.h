#pragma once
#include <atomic>
#include <cstdint>

#include "ledger.h"
#include "options.h"
#include "registry.h"
#include "stats.h"

// Process-wide state of the shim: options, statistics, the registries of live regions, and the
// life cycle (init from the environment, fork, exit). Everything here is safe to use from a hook
// before init has run (it then sees defaults) and after exit has begun (nothing is destroyed).
namespace gms {

// Constant-initialised, so usable from any hook at any time; inline for the launch hook's sake.
extern Stats g_stats;
inline Stats& runtime_stats() { return g_stats; }
DeviceLedger& ledger();

// Three layers of the registry. They overlap by nature (a malloc'd block the program registers
// is a host block and a registration at once), so each is its own interval map.
Registry& cuda_regions();        // device, managed, pinned host and VMM memory made by the driver
Registry& host_blocks();         // large malloc-family and mmap blocks of the program
Registry& host_registrations();  // cuMemHostRegister ranges

const Options& options();
// True when an option was invalid: the shim then observes and counts, and changes nothing.
bool passthrough();
bool exiting();

// Host blocks at or above this size are tracked; read on every malloc, so kept in one atomic.
extern std::atomic<uint64_t> g_host_threshold;
inline uint64_t host_threshold() { return g_host_threshold.load(std::memory_order_relaxed); }

// Idempotent; the library's constructor calls it (and then trace::configure, whose fork handlers
// must come after these). Tests call it after changing the environment.
void runtime_init();
// Writes the statistics where GPUMEMSHIM_STATS says; the library's destructor calls it.
void runtime_report();

}  // namespace gms
