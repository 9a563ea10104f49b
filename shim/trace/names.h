#pragma once
// Interned names (kernel names, NVTX range names and domains): CUPTI's strings live only as long
// as its buffer, so the backend copies each distinct one once and puts its id in the record.
// intern() locks and allocates: CUPTI's threads and the writer only, never a hook. name() is a
// lock-free read of a published slot.
#include <cstdint>

namespace gms::trace::names {

constexpr uint32_t kCapacity = 1u << 16;  // distinct names; later ones become id 0 ("?")

uint32_t intern(const char* s);  // 0 for nullptr or when full
const char* name(uint32_t id);   // nullptr for 0

void lock_for_fork();
void unlock_in_parent();
void reinit_in_child();

}  // namespace gms::trace::names
