// Pages of managed memory that moved between the CPU and the GPU, counted from the CPU's page table
// at moments when nothing moves them: before a kernel that uses the region is launched, after the
// program synchronised with the device, before the region is freed, at exit.
//
// Why: CUPTI's unified-memory records undercount. On the H200 a kernel of 264 blocks over 256 MiB
// of managed memory the CPU had written left 35% to 60% of its migrations recorded ("dropped: 0"),
// and the CPU reading pages back left no migration record at all (tools/report/README.md). A
// managed page the GPU holds is unmapped from the CPU, and the CPU's fault maps it again when it
// comes back (/proc/self/pagemap "present", measured: docs/design/policies.md), so two looks at the
// page table tell which pages went to the GPU (present, then not) and which came back (not present,
// then present again).
//
// What it cannot see: a page that goes and comes back between two looks (the CPU touching managed
// memory while a kernel runs, or before a synchronisation the census is not told of), and pages
// made on the GPU and first touched by the CPU while the region is not in use by a kernel, which
// count as brought back (a page a kernel first touched and the CPU then reads is a migration back
// and counts; one the CPU makes afresh is not and counts all the same).
//
// Pure code: no CUDA, no I/O.
#pragma once

#include <cstdint>
#include <vector>

namespace gms::policy {

struct PageMoves {
  uint64_t to_gpu = 0;  // pages the CPU held at the last look that it no longer holds
  uint64_t to_cpu = 0;  // pages known to be away (on the GPU) that the CPU holds again
};

class PageCensus {
 public:
  explicit PageCensus(uint64_t pages);
  uint64_t pages() const { return pages_; }
  uint64_t words() const { return present_.size(); }

  // `present`: the CPU's page table now, one bit a page (page i is bit i % 64 of word i / 64),
  // words() words. `gpu_used`: a kernel may have used the region since the last look, so a page
  // the CPU does not hold now is on the GPU even if the CPU never held it (the GPU made it). The
  // first look counts nothing: it is where the census starts.
  PageMoves look(const uint64_t* present, bool gpu_used);

  // Pages the CPU held at the last look.
  uint64_t cpu_pages() const;

 private:
  uint64_t pages_;
  bool looked_ = false;
  std::vector<uint64_t> present_;  // at the last look
  std::vector<uint64_t> away_;     // known to be on the GPU
};

}  // namespace gms::policy
