// Pointer tables: device memory that holds addresses of movable memory, so that a kernel given the
// table reaches what the table points to without the launch scan seeing it among its arguments
// (cuBLAS's batched GEMM over arrays of matrix pointers filled by a copy, a grouped GEMM whose
// arrays an earlier kernel wrote). Scan order (act/swap.h) orders each move against the launches
// that use the chunk; a use through a table must count as a use, or a move can meet the kernel
// mid-copy (stale data) or mid-remap (a fault).
//
// What the shim sees written into device memory, and what each tells:
// - a copy from the host: exactly which addresses lie where (the source's words), replacing what
//   the same bytes held before ("stored");
// - a copy between device buffers: the source's entries, shifted ("copied");
// - a memset: nothing there any more ("cleared");
// - a kernel: not what it writes. A kernel given addresses of movable memory and a small buffer may
//   have written the former into the latter, so the buffer "may hold" them: kept apart from what is
//   known, since it only orders (the kernel that reads such a table waits for moves of those
//   chunks), while what a copy stored is a use like an argument (the planner brings it in).
// A table holding more addresses than `max_pointers` reaches anything: its readers are work no
// scan sees.
//
// Pure decision code: no CUDA, no globals, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace gms::policy {

struct PointerTablesConfig {
  // Host copies at most this long are read for addresses: pointer tables are small, and reading a
  // large copy's source would cost the copy's time again.
  uint64_t max_copy_bytes = 256ull << 10;
  // Buffers at most this long may be written a table by a kernel (the "may hold" rule).
  uint64_t max_table_bytes = 1ull << 20;
  // Addresses one table keeps, known and "may hold" together, before it reaches anything.
  size_t max_pointers = 256;
};

class PointerTables {
 public:
  using Addr = uint64_t;
  struct Word {
    uint64_t offset;  // within the table's allocation
    Addr value;
  };
  // What a kernel given (a pointer into) a table reaches.
  struct Reach {
    std::vector<Addr> stored;  // addresses copies put there: uses
    std::vector<Addr> maybe;   // addresses a kernel may have written there: ordered only
    bool anything = false;     // more than max_pointers: work no scan sees
  };

  explicit PointerTables(PointerTablesConfig cfg = {}) : cfg_(cfg) {}
  const PointerTablesConfig& config() const { return cfg_; }

  // A copy from the host wrote [offset, offset + bytes) of the allocation at `base` (`size` long);
  // `words` are the addresses of movable memory among the source's words (offsets in the table).
  void stored(Addr base, uint64_t size, uint64_t offset, uint64_t bytes, const std::vector<Word>& words);
  // A kernel given `pointers` (addresses of movable memory) was given the allocation at `base`
  // (`size` long) too. Larger than max_table_bytes: nothing kept.
  void may_hold(Addr base, uint64_t size, const std::vector<Addr>& pointers);
  // A device-to-device copy of `bytes` from `src` (+ src_offset) to `dst` (+ dst_offset).
  void copied(Addr dst, uint64_t dst_size, uint64_t dst_offset, Addr src, uint64_t src_offset, uint64_t bytes);
  // A memset of [offset, offset + bytes) of the allocation at `base`.
  void cleared(Addr base, uint64_t offset, uint64_t bytes);
  // The allocation at `base` was freed.
  void freed(Addr base);

  // The table whose allocation holds `addr`, or null; `base` and `size`: the allocation's.
  const Reach* reach(Addr addr, Addr* base = nullptr, uint64_t* size = nullptr) const;
  // Whether `addr` may lie in a table: false for sure outside the span tables have had (a cheap
  // test in front of reach, for every word of a copy).
  bool in_span(Addr addr) const { return addr >= lo_ && addr < hi_; }
  // How many of `words` (of the allocation at `base`, `size` long) the table does not hold already
  // at their offsets: a kernel that left a table as a copy filled it wrote none of it.
  size_t news(Addr base, uint64_t size, const std::vector<Word>& words) const;
  bool empty() const { return tables_.empty(); }
  size_t size() const { return tables_.size(); }

 private:
  struct Table {
    uint64_t size = 0;
    std::map<uint64_t, Addr> known;  // offset -> address, from copies
    std::vector<Addr> maybe;         // from kernels, each once
    bool anything = false;
    Reach reach;  // rebuilt after each change: readers ask far more often than tables change
  };
  // The table at `base` if it is of an allocation of `size` (another size: another allocation at
  // the same address since, its free unseen: the old table is dropped), else null.
  Table* current(Addr base, uint64_t size);
  Table& table(Addr base, uint64_t size);
  void settle(Addr base);

  PointerTablesConfig cfg_;
  std::map<Addr, Table> tables_;  // by the allocation's base
  Addr lo_ = ~Addr{0}, hi_ = 0;   // the span tables have had (never shrinks)
};

}  // namespace gms::policy
