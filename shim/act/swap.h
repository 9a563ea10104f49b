#pragma once
// Movable device memory (GPUMEMSHIM_POLICY=swap): the program gets virtual addresses that stay
// valid for the allocation's whole life, backed chunk by chunk either by device memory or by pinned
// host memory mapped for the device. Under the default order every chunk is always mapped, so every
// kernel reads and writes it correctly (host-backed chunks over the link) and no missed reference
// can fault or lose data; the residency planner only decides where each chunk should be for speed.
// Not managed memory: the copy engines move a chunk several times faster than migrating managed
// memory does (docs/analysis/swap-notes.md).
//
// Copies reach the memory through side mappings of its own (Backing::side), never through the
// program's range, so a range is remapped as soon as no kernel uses it, while its data is still on
// the way. A launch's moves are carried out together. Under GPUMEMSHIM_SWAP_ORDER=context (the
// default) they start with one synchronisation of the context, so no queued kernel (on any stream)
// can be writing a chunk while it is copied out or using one while its backing changes, and the
// copies are waited for before the launch. Under scan order they wait only for the launches the
// scan saw use the ranges moved (an event recorded after each), copy on the shim's own streams,
// and leave whatever uses the ranges next to wait for the copies on the GPU: kernels queued before
// keep running meanwhile. In either order a round first waits while another thread is queueing
// work (from the end of its hook's planning to after its driver call: begin_queue, end_queue), so
// that the work is among what the round waits for and its writes reach the copies out. With
// GPUMEMSHIM_SWAP_PARK=on, scan order also leaves evicted chunks unmapped (parked) until something
// the shim sees uses them, which saves mapping host memory. The driver then knows nothing there (a
// pointer query has the chunk mapped first: unpark). Work the scan does not see (2D, 3D, batched,
// peer and array copies, graph launches, kernels with no parameter layout) first waits for the
// copies and has every parked chunk mapped, and makes the next round wait for the context. What no
// hook sees at all, a kernel reaching movable memory through a pointer stored in device memory,
// may meet a chunk mid-move or parked (stale data or a fault): the price of scan order.
//
// Allocations are placed in slabs of the program's address space cut into chunks (policy/arena.h):
// a chunk is what is backed, mapped and moved, and several allocations share one. Memory the
// program frees stays mapped where it is, and any later allocation that fits gets it with no
// driver call: a framework that frees and allocates tensors every step (PyTorch with its
// cudaMallocAsync backend) then pays for no mapping, and a stream-ordered free waits for nothing
// (an event recorded on its stream orders the reuse). Chunks that hold nothing live keep their
// device memory until room is needed: they are the first to give it back.
//
// The parts, each with its own state under one lock (act/swap/): base.h (the lock), marks (events,
// the copy gate), sums (checksums of chunks on the GPU), backing (memory behind chunks, spares,
// kept host copies), slabs (the allocator, the chunk table), fill (chunks brought back piece by
// piece), scan (scan-order bookkeeping), round (the move round).
//
// Scan order keeps the host copy of a chunk brought in while such copies pay: a chunk leaving
// copies out only the 2 MiB pieces whose sums changed since it came in (act/swap/sums.h). While
// they do not pay, a chunk comes back piece by piece, as its uses need them (act/swap/fill.h).
#include <cstdint>
#include <vector>

#include "driver/cuda_driver.h"

namespace gms::act::swap {

// The unit of backing and of moves (GPUMEMSHIM_SWAP_CHUNK); each chunk is one residency region.
uint64_t chunk_bytes();
// The chunk that holds `addr` of movable memory: slabs are chunk aligned.
inline uintptr_t chunk_of(uintptr_t addr) { return addr / chunk_bytes() * chunk_bytes(); }

// How the program asked for memory or gave it back: stream-ordered on `stream`, or not.
struct Use {
  CUstream stream = nullptr;
  bool stream_ordered = false;
  bool per_thread = false;  // stream 0 is the per-thread default stream
};

// A chunk that held nothing live and now holds part of a new allocation: the residency planner
// tracks it again (on the device or not).
struct Woken {
  uintptr_t base = 0;
  bool on_device = false;
};

// Places `bytes` in free space on `dev` that the device already backs: no mapping, no driver call
// but the waits for the frees of that space (on the GPU for a stream-ordered use). False if there
// is none.
bool reuse(CUdeviceptr* out, uint64_t bytes, int dev, const Use& use, std::vector<Woken>* woken);

// Device memory a new allocation of `bytes` would need for chunks with no backing yet.
uint64_t backing_needed(uint64_t bytes, int dev);

// Places `bytes` in free space over chunks backed by the device or by nothing, backing the latter
// with device memory when `on_device`, else with host memory; a new slab of at least `slab_bytes`
// of address space when none has room. Out-of-memory and other driver errors leave nothing behind.
CUresult create(CUdeviceptr* out, uint64_t bytes, int dev, bool on_device, const Use& use, uint64_t slab_bytes,
                std::vector<Woken>* woken);

// The program freed the allocation at `base`. A stream-ordered free records an event on its stream
// that the next user of the space waits for; any other waits for the context. Chunks left with
// nothing live (`dead`) keep their memory, the oldest given back while those on the device hold
// more than `keep` bytes; when the program holds no movable memory any more, everything goes.
CUresult retire(uintptr_t base, const Use& use, uint64_t keep, std::vector<uintptr_t>* dead);
// Whether the chunk holds nothing live (it is not a residency region then).
bool holds_nothing(uintptr_t chunk);

// Scan order: whether the chunk is on the device and a move of it now would wait for nothing
// (every launch the scan saw use it is over, and no work no scan saw was queued since the last
// round). False under context order.
bool uses_over(uintptr_t chunk);

// Device memory held by chunks of `dev` with nothing live.
uint64_t retired_device_bytes(int dev);
// Unmaps the oldest such chunks of `dev` until at least `device_bytes` of their device memory are
// off them (or none are left). Their memory becomes spare while the spares hold less than
// `keep_spare` (the next new chunks and prefetches map it: no release, no cuMemCreate), and is
// released after that.
void release_retired(int dev, uint64_t device_bytes, uint64_t keep_spare = 0);
// Spare device memory of `dev`: no chunk's, not counted by the chunks' bytes above or by the
// residency planner. The budget's users keep it within the budget with trim_spares.
uint64_t spare_device_bytes(int dev);
// Releases spare device memory of `dev` until at most `allowed` bytes are left.
void trim_spares(int dev, uint64_t allowed);
// Device memory of `dev` counted against its budget: the program's, the residency planner's and
// that of the chunks with nothing live (spares not included: they are the room the budget leaves).
uint64_t taken(int dev);
// Releases spare device memory of `dev` beyond what its budget (driver/budget.h) leaves once
// `more` bytes are taken too.
void fit_spares(int dev, uint64_t more);

// One of a launch's moves: the chunk at `base` (a residency region is one chunk), `bytes` long.
struct Move {
  uintptr_t base = 0;
  uint64_t bytes = 0;
  bool to_device = false;
  bool ahead = false;  // a prefetch ahead of its launch: its bytes come now, not piece by piece
  CUresult result = CUDA_SUCCESS;  // out: the first error; a chunk not moved keeps its data
};
// Carries out `moves` together. Context order: one context synchronisation, the copies on
// `stream` and a wait for them. Scan order: a wait for the launches that used the ranges, the
// copies on the shim's streams, and no wait for them (await_ready). Either way the copies go
// between side mappings of the memory, so the remaps (the device memory evictions free backs the
// prefetches) overlap them. Chunks already where they should be stay.
void move(std::vector<Move>& moves, CUstream stream, bool per_thread);

// GPUMEMSHIM_SWAP_ORDER=scan, for a launch whose scan found the chunks at `bases`, using the 2 MiB
// pieces `pieces[k]` of chunk k (bit j: bytes [j * 2 MiB, (j + 1) * 2 MiB) of it; null: all of
// them). Before it: the pieces a chunk brought back lazily does not hold yet are copied in
// (act/swap/fill.h), its stream waits for copies in still under way into them, and parked chunks
// are mapped. After it
// (`launched` or not, always once after await_ready): it is their last use on its stream, which
// moves of their chunks wait for. `unmarked`: the launch also used ranges not listed; the next
// round waits for the context.
void await_ready(const uintptr_t* bases, const uint32_t* pieces, size_t n, CUstream stream, bool per_thread);
void mark_used(const uintptr_t* bases, size_t n, CUstream stream, bool per_thread, bool unmarked, bool launched);
// Scan order, before work that no scan saw (a 2D, 3D, batched, peer or array copy, a graph
// launch, a launch with too many ranges to list): waits until the shim's copies are over and maps
// every parked chunk, so it cannot meet a chunk whose data is still on its way; until
// end_unscanned (once, after the work is queued) no round parks a chunk.
void finish_copies();
void end_unscanned();
// A pointer query (cuPointerGetAttribute(s), cuMemGetAddressRange) at `addr`: if it is in a parked
// chunk, the chunk's host memory is mapped there first, since the driver knows nothing at a parked
// address and the query would fail (CuPy importing a PyTorch tensor asks).
void unpark(uintptr_t addr);
// Reads `n` bytes at `src` (movable memory or not) into host memory at `dst`: after the copies of
// the chunk's last move and with no round under way, on a stream of the shim's own that waits for
// no work of the program's (mapping the chunk first if parked). Returns once the bytes are there.
CUresult read(void* dst, uintptr_t src, size_t n);
// Another thread's launch, copy, memset or work no scan sees is being queued: from the end of its
// hook's planning (under the residency lock, after its own moves) to after its driver call. Rounds
// of moves wait until no such window is open (act/residency.cc opens one for every launch and
// transfer while movable memory exists: a lock each way).
void begin_queue();
void end_queue();
// A copy or memset the hooks planned and marked like a launch (act/residency.h, TransferScope):
// not work the scan missed.
void count_scanned_transfer();

}  // namespace gms::act::swap
