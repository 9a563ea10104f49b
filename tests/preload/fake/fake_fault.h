#pragma once
// Fault injection for the stand-in driver (issue 28): with FAKE_CUDA_FAIL=NAME:N[:CODE] the Nth call
// (1-based) of implementation NAME returns CODE (a CUresult number; CUDA_ERROR_OUT_OF_MEMORY by
// default) before doing anything, whoever calls it: the program, or the shim for itself. With
// FAKE_CUDA_COUNTS=PATH the library writes "NAME COUNT" for every implementation called at exit, so
// that a test can try every N of every kind a workload reaches.
#include <atomic>

namespace fake_fault {

extern int g_id;                // the implementation to fail; -1: none
extern unsigned long g_nth;     // on its Nth call
extern int g_code;              // with this CUresult

// At load: reads both variables. `names` and `calls` are the stand-in's tables, kept for the dump.
void configure(const char* const* names, const std::atomic<unsigned long>* calls, int count);

inline bool hit(int id, unsigned long nth) { return id == g_id && nth == g_nth; }

}  // namespace fake_fault
