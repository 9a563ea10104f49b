#pragma once
// Texture objects over linear or pitched memory, per device: a kernel given a texture object's
// handle reads the memory behind it, so the launch scan (act/launch_scan) takes such a handle, met
// as a kernel argument, for a pointer to that memory too. A handle is a small number, which
// another device's context may hand out too.
#include <cstdint>

#include "driver/cuda_driver.h"

namespace gms::act {

// A texture object made over the memory at `base` in the current device's context, and one about
// to be destroyed (returns the memory it read, 0 if unknown, for texture_made to put back should
// the destroy fail).
void texture_made(CUtexObject tex, uintptr_t base);
uintptr_t texture_gone(CUtexObject tex);
// The memory that the texture object `handle` of `dev` reads; 0 when `handle` is none (no lock
// taken while there are no texture objects).
uintptr_t texture_memory(int dev, uint64_t handle);

}  // namespace gms::act
