#pragma once
// Which pages of managed memory the CPU holds right now, sampled from the process's page table
// (/proc/self/pagemap, "present"): a managed page the GPU has is unmapped from the CPU, and the
// CPU's fault on it maps it again when it comes back. Measured on an H200 (2026-11-26,
// docs/design/policies.md): 64 samples of 256 MiB read all 0 after a kernel touched it and all 64
// after the CPU wrote it, in 30 to 60 us; 16 samples cost a quarter of that.
#include <cstdint>

namespace gms::act {

struct PageSample {
  uint32_t cpu = 0;      // sampled pages the CPU holds
  uint32_t samples = 0;  // pages sampled (0: the page table cannot be read here)
};

// `samples` pages spread evenly over [base, base + bytes). Safe from any thread; after fork the
// child reads its own table.
PageSample sample_cpu_pages(uintptr_t base, uint64_t bytes, uint32_t samples);

// Whether the page table follows managed memory here, tried once per process on managed memory of
// its own on `device` (the CPU writes it: present; prefetched to the device: not present). False
// where it does not (a driver that keeps the CPU's mapping, the stand-in driver of the tests) or
// cannot be read. Synchronises the legacy stream once, the first time it is called.
bool cpu_pages_follow_managed(int device);

}  // namespace gms::act
