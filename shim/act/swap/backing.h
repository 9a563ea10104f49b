#pragma once
// Backing memory of movable memory: the device or pinned host memory behind each chunk, mapped
// at a range of its own (side) where the shim's copies reach it; the spares kept for the next
// chunk; and the batches of memory that copies still read, back to the spares after them.
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "act/piece_uses.h"
#include "marks.h"
#include "policy/keep_copies.h"

namespace gms::act::swap {

// Memory behind one chunk, device or pinned host, with a range of its own (side) where the shim's
// copies reach it. Copies never go through the program's range, so remapping that range never
// waits for them: only for the kernels that use it. Host memory is mapped there when made; device
// memory when first copied (most of it never moves). Host chunks are kept for reuse: making them
// costs far more than mapping them (docs/analysis/swap-notes.md).
struct Backing {
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr side = 0;
  uint64_t size = 0;
  int dev = 0;  // the side range is mapped for this device only
  bool host = false;
};

struct Chunk {
  Backing device;  // handle nonzero: backed by the device
  Backing host;    // else by this
  // Scan order: host-backed but not mapped in the program's range until something the shim sees
  // uses it (map_parked): most evicted chunks are brought back before anything reads them over
  // the link, and mapping host memory there is dear.
  bool parked = false;  // set with set_parked
  // Scan order, on the device: the host copy it came in from, kept while the host memory made
  // stays within the managed limit, and the slot of the sum of what came in (act/swap/sums.h).
  // While the chunk's sum is unchanged the copy is still right, and an eviction copies nothing.
  Backing clean;
  int sum = -1;
  uint64_t salt = 0;
  // Of a lazy chunk: the 2 MiB pieces whose bytes its device memory holds.
  uint32_t valid = 0;
  bool on_device() const { return device.handle != 0; }
  // Scan order, brought back lazily (GPUMEMSHIM_SWAP_LAZY, act/swap/fill.h): on the device and
  // still holding the host memory it came from, which has the data of the pieces not in `valid`
  // (any other chunk on the device gives its host memory back when it comes in).
  bool lazy() const { return on_device() && host.handle != 0; }
};

// Chunks parked, counted: a pointer query takes no lock while none is (unpark). A chunk that goes
// away parked is counted off when its range is erased (release_dead).
void set_parked(Chunk& c, bool parked);
int64_t parked_chunks();

// One chunk's worth of a mapping: `handle` over [va, va + size).
struct Piece {
  CUdeviceptr va;
  uint64_t size;
  CUmemGenericAllocationHandle handle;
};
// Maps the pieces, which lie back to back from pieces[0].va and are unmapped, and gives the device
// access to all of them with one call: the driver charges host memory per call. On failure
// nothing of it stays mapped.
CUresult map_span(const std::vector<Piece>& pieces, int dev);
CUresult map(CUdeviceptr va, uint64_t size, CUmemGenericAllocationHandle handle, int dev);
// Maps a chunk's memory at a side range of its own, if it has none yet.
CUresult give_side(Backing& b);
void drop_backing(const Backing& b);

// The state of this part. Caller holds mu().
struct Backings {
  std::multimap<std::pair<int, uint64_t>, Backing> spare;  // host chunks, by device and size
  // Device memory no chunk holds, side range kept: what dead chunks give back for room and
  // evictions leave after their copies. The next new chunk or prefetch maps it instead of making
  // memory, and the memory it would replace is not released. Not counted by the budget's users
  // (it is the room they were given); trim keeps it within the budget.
  std::vector<Backing> spare_device[kMaxDevices];
  // Scan order: host chunks that copies in still read and device memory that copies out still
  // read, each batch with the event that ends them.
  struct Pending {
    Mark done;
    std::vector<Backing> hosts;    // back to the spares
    std::vector<Backing> devices;  // spare after them
  };
  std::deque<Pending> pending;

  void give_host(const Backing& h);
  void give_device(const Backing& d);
  uint64_t spare_bytes(int dev) const;
  // Batches whose copies are over: their host chunks and device memory go back to the spares;
  // with `all`, after waiting for them; with `until`, only until a spare of that device and size
  // is back.
  void reap(bool all, const std::pair<int, uint64_t>* until = nullptr);
  // Host memory for one chunk, side range and all: a spare, else after the copies that still hold
  // one, else new.
  CUresult take_host(uint64_t size, int dev, Backing* out);
  // Spare device memory of `size` on `dev` (side range and all), else new memory without a side
  // range; after waiting for the evictions' copies when the device is full and some are under way.
  CUresult take_device(uint64_t size, int dev, Backing* out);
  bool has_spare_device(uint64_t size, int dev) const;
  // Scan order: device memory of `size` on `dev` that a batch's copies out still read, taken from
  // the oldest such batch; `after` is the batch's end, which whatever writes the memory waits for
  // on the GPU. False when no batch holds such memory.
  bool take_pending_device(uint64_t size, int dev, Backing* out, Mark* after);
  // Scan order: a batch of spent memory (moved out of the vectors), spare once the copies queued on
  // `stream` so far are over; false, with the vectors untouched, when no mark could be recorded.
  bool pend(std::vector<Backing>& hosts, std::vector<Backing>& devices, CUstream stream);
  // Host memory that copies in queued so far on `in` may still read: spare after them.
  void give_host_after(const Backing& h, CUstream in);
  // A lazy chunk (act/swap/fill.h) of `size` at `base`, where the program's new allocation takes
  // [lo, hi): the pieces it covers whole need no copy in (a new allocation's bytes are undefined).
  void cover(Chunk& c, uintptr_t base, uint64_t size, uintptr_t lo, uintptr_t hi);
  // A lazy chunk that holds every piece is an ordinary chunk on the device: its host memory goes
  // back once the copies in queued so far are over.
  void complete(Chunk& c, uint64_t size);
  // Whether host memory of `bytes` more stays within the managed limit (none: always).
  bool within_host_limit(uint64_t bytes) const;
  // Releases a chunk's backing, or with `keep`, makes its device memory spare; the program's range
  // must already be unmapped there.
  void release(Chunk& c, bool keep = false);
  // The chunk's clean copy goes to the spares and its sum's slot back.
  void drop_clean(Chunk& c);
  // Whether the chunk coming in now (counted) keeps its host copy of `bytes`: while kept copies pay
  // (policy/keep_copies.h) and the host memory made for movable memory stays within the managed
  // limit (none: always).
  bool may_keep_clean(uint64_t bytes);
  policy::KeepCopies keep_copies;
  // Releases spare device memory of `dev` until at most `allowed` bytes are left.
  void trim(int dev, uint64_t allowed);
  // The program holds no movable memory any more: after the copies, every spare goes back.
  void release_all();
};
Backings& backings();

}  // namespace gms::act::swap
