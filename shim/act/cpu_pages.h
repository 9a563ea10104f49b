#pragma once
// Which pages of managed memory the CPU holds right now, sampled from the process's page table
// (/proc/self/pagemap, "present"): a managed page the GPU has is unmapped from the CPU, and the
// CPU's fault on it maps it again when it comes back. What was measured: docs/design/policies.md,
// "Managed memory the CPU and the GPU take turns on".
#include <cstdint>

namespace gms::act {

struct PageSample {
  uint32_t cpu = 0;      // sampled pages the CPU holds
  uint32_t samples = 0;  // pages sampled (0: the page table cannot be read here)
};

// `samples` pages spread evenly over [base, base + bytes). Safe from any thread; after fork the
// child reads its own table.
PageSample sample_cpu_pages(uintptr_t base, uint64_t bytes, uint32_t samples);

// Every page of [base, base + pages * 4096), one bit a page (page i is bit i % 64 of word i / 64
// of `bits`, (pages + 63) / 64 words): whether the CPU holds it. False where the table cannot be
// read (then `bits` is not to be used).
bool read_cpu_pages(uintptr_t base, uint64_t pages, uint64_t* bits);

// Whether the page table follows managed memory here, tried once per process on 2 MiB of managed
// memory of its own on `device` (the CPU writes it: present; prefetched to the device on a stream
// of the shim's own: not present), kept for the process. False where it does not (a driver that
// keeps the CPU's mapping, the stand-in driver of the tests), without concurrent managed access,
// or where the table cannot be read.
bool cpu_pages_follow_managed(int device);

}  // namespace gms::act
