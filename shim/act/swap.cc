#include "swap.h"

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/guard.h"
#include "core/log.h"
#include "entry/common.h"
#include "policy/residency.h"

namespace gms::act::swap {
namespace {

using entry::call_real;

constexpr uint64_t kGranule = 2ull << 20;  // cuMemCreate's granularity on every current GPU

uint64_t round_up(uint64_t n) { return (n + kGranule - 1) / kGranule * kGranule; }

// Pinned host memory for one chunk, mapped once at a range of its own so that copies can reach it
// while the program's range is still backed by the device. Kept for reuse: making it costs about
// 200 ms per GiB on the H100, mapping it 13 ms per GiB.
struct HostChunk {
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr side = 0;
  uint64_t size = 0;
};

struct Chunk {
  CUmemGenericAllocationHandle device = 0;  // nonzero: backed by the device
  HostChunk host;                           // else by this
};

struct Range {
  uint64_t size = 0;  // reserved bytes (rounded up)
  int dev = 0;
  std::vector<Chunk> chunks;
  uint64_t offset_of(size_t i) const { return i * chunk_bytes(); }
  uint64_t size_of(size_t i) const { return std::min(chunk_bytes(), size - offset_of(i)); }
};

struct State {
  std::mutex mu;  // guards everything below; held across a move (moves are rare and synchronous)
  std::unordered_map<uintptr_t, Range> ranges;
  std::multimap<uint64_t, HostChunk> spare;  // by size
};

State& state() {
  static NoDestructor<State> s;
  return *s;
}

CUmemAllocationProp prop(bool host, int dev) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = host ? 0 : dev;
  return p;
}

CUresult allow_device(CUdeviceptr va, uint64_t size, int dev) {
  CUmemAccessDesc d{};
  d.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return call_real(GMS_REAL(cuMemSetAccess), va, static_cast<size_t>(size), &d, size_t{1});
}

// Maps `handle` over [va, va + size) for the device; on failure nothing stays mapped.
CUresult map(CUdeviceptr va, uint64_t size, CUmemGenericAllocationHandle handle, int dev) {
  CUresult r = call_real(GMS_REAL(cuMemMap), va, static_cast<size_t>(size), size_t{0}, handle, 0ull);
  if (r != CUDA_SUCCESS) return r;
  r = allow_device(va, size, dev);
  if (r != CUDA_SUCCESS) call_real(GMS_REAL(cuMemUnmap), va, static_cast<size_t>(size));
  return r;
}

void drop_host(const HostChunk& h) {
  call_real(GMS_REAL(cuMemUnmap), h.side, static_cast<size_t>(h.size));
  call_real(GMS_REAL(cuMemAddressFree), h.side, static_cast<size_t>(h.size));
  call_real(GMS_REAL(cuMemRelease), h.handle);
}

// Caller holds s.mu.
CUresult take_host(State& s, uint64_t size, int dev, HostChunk* out) {
  auto it = s.spare.find(size);
  if (it != s.spare.end()) {
    *out = it->second;
    s.spare.erase(it);
    return CUDA_SUCCESS;
  }
  HostChunk h;
  h.size = size;
  CUmemAllocationProp p = prop(true, dev);
  CUresult r = call_real(GMS_REAL(cuMemCreate), &h.handle, static_cast<size_t>(size), &p, 0ull);
  if (r != CUDA_SUCCESS) return r;
  r = call_real(GMS_REAL(cuMemAddressReserve), &h.side, static_cast<size_t>(size), size_t{0}, CUdeviceptr{0}, 0ull);
  if (r == CUDA_SUCCESS) {
    r = map(h.side, size, h.handle, dev);
    if (r != CUDA_SUCCESS) call_real(GMS_REAL(cuMemAddressFree), h.side, static_cast<size_t>(size));
  }
  if (r != CUDA_SUCCESS) {
    call_real(GMS_REAL(cuMemRelease), h.handle);
    return r;
  }
  *out = h;
  return CUDA_SUCCESS;
}

void give_host(State& s, const HostChunk& h) { s.spare.emplace(h.size, h); }

// Releases chunk i's backing; the program's range must already be unmapped there.
void release(State& s, Chunk& c) {
  if (c.device) {
    call_real(GMS_REAL(cuMemRelease), c.device);
    c.device = 0;
  } else if (c.host.handle) {
    give_host(s, c.host);
    c.host = {};
  }
}

CUresult copy(CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream stream, bool per_thread) {
  return per_thread ? call_real(GMS_REAL(cuMemcpyDtoDAsync_v2_ptsz), dst, src, static_cast<size_t>(n), stream)
                    : call_real(GMS_REAL(cuMemcpyDtoDAsync_v2), dst, src, static_cast<size_t>(n), stream);
}

void say(const char* what, CUresult r, uint64_t bytes) {
  Line l;
  l.str("swap: ").str(what).str(" of ").bytes(bytes).str(" failed (CUresult ").i64(r).str("): the data stays where it was");
  log(LogLevel::warn, l);
}

}  // namespace

uint64_t chunk_bytes() { return policy::ResidencyConfig{}.chunk_bytes; }

CUresult create(CUdeviceptr* out, uint64_t bytes, int dev, bool on_device) {
  ShimScope scope;
  State& s = state();
  Range range;
  range.size = round_up(bytes == 0 ? 1 : bytes);
  range.dev = dev;
  CUdeviceptr va = 0;
  CUresult r = call_real(GMS_REAL(cuMemAddressReserve), &va, static_cast<size_t>(range.size), size_t{0}, CUdeviceptr{0}, 0ull);
  if (r != CUDA_SUCCESS) return r;
  size_t n = (range.size + chunk_bytes() - 1) / chunk_bytes();
  range.chunks.resize(n);
  std::lock_guard lock(s.mu);
  size_t done = 0;
  for (; done < n && r == CUDA_SUCCESS; ++done) {
    Chunk& c = range.chunks[done];
    uint64_t off = range.offset_of(done), size = range.size_of(done);
    if (on_device) {
      CUmemAllocationProp p = prop(false, dev);
      r = call_real(GMS_REAL(cuMemCreate), &c.device, static_cast<size_t>(size), &p, 0ull);
      if (r == CUDA_SUCCESS) {
        r = map(va + off, size, c.device, dev);
        if (r != CUDA_SUCCESS) release(s, c);
      }
    } else {
      r = take_host(s, size, dev, &c.host);
      if (r == CUDA_SUCCESS) {
        r = map(va + off, size, c.host.handle, dev);
        if (r != CUDA_SUCCESS) release(s, c);
      }
    }
  }
  if (r != CUDA_SUCCESS) {
    for (size_t i = 0; i + 1 < done; ++i) {  // chunk done-1 failed and holds nothing
      call_real(GMS_REAL(cuMemUnmap), va + range.offset_of(i), static_cast<size_t>(range.size_of(i)));
      release(s, range.chunks[i]);
    }
    call_real(GMS_REAL(cuMemAddressFree), va, static_cast<size_t>(range.size));
    return r;
  }
  s.ranges.emplace(static_cast<uintptr_t>(va), std::move(range));
  *out = va;
  return CUDA_SUCCESS;
}

CUresult destroy(uintptr_t base) {
  ShimScope scope;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.ranges.find(base);
  if (it == s.ranges.end()) return CUDA_ERROR_INVALID_VALUE;
  Range& range = it->second;
  CUresult first = CUDA_SUCCESS;
  for (size_t i = 0; i < range.chunks.size(); ++i) {
    CUresult r = call_real(GMS_REAL(cuMemUnmap), static_cast<CUdeviceptr>(base + range.offset_of(i)),
                           static_cast<size_t>(range.size_of(i)));
    if (r == CUDA_SUCCESS) release(s, range.chunks[i]);  // else leak it rather than reuse mapped memory
    if (first == CUDA_SUCCESS) first = r;
  }
  CUresult r = call_real(GMS_REAL(cuMemAddressFree), static_cast<CUdeviceptr>(base), static_cast<size_t>(range.size));
  if (first == CUDA_SUCCESS) first = r;
  s.ranges.erase(it);
  if (s.ranges.empty()) {
    // The program holds no movable memory any more: the spare host memory goes back too.
    for (auto& [size, h] : s.spare) drop_host(h);
    s.spare.clear();
  }
  return first;
}

CUresult move(uintptr_t base, uint64_t offset, uint64_t bytes, bool to_device, CUstream stream, bool per_thread) {
  ShimScope scope;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.ranges.find(base);
  if (it == s.ranges.end()) return CUDA_ERROR_INVALID_VALUE;
  Range& range = it->second;
  const CUdeviceptr va = static_cast<CUdeviceptr>(base);
  size_t from = offset / chunk_bytes();
  size_t to = std::min(range.chunks.size(), static_cast<size_t>((offset + bytes + chunk_bytes() - 1) / chunk_bytes()));
  CUresult first = CUDA_SUCCESS;
  auto fail = [&](const char* what, CUresult r, uint64_t n) {
    say(what, r, n);
    if (first == CUDA_SUCCESS) first = r;
  };

  if (!to_device) {
    // Out: copy each device chunk into host memory after the work queued before it on the stream,
    // wait for everything queued anywhere, then back the range with the host copy.
    std::vector<std::pair<size_t, HostChunk>> moving;
    for (size_t i = from; i < to; ++i) {
      if (!range.chunks[i].device) continue;
      HostChunk h;
      CUresult r = take_host(s, range.size_of(i), range.dev, &h);
      if (r == CUDA_SUCCESS) r = copy(h.side, va + range.offset_of(i), range.size_of(i), stream, per_thread);
      if (r != CUDA_SUCCESS) {
        if (h.handle) give_host(s, h);
        fail("eviction", r, range.size_of(i));
        continue;
      }
      moving.emplace_back(i, h);
    }
    if (moving.empty()) return first;
    CUresult r = call_real(GMS_REAL(cuCtxSynchronize));
    for (auto& [i, h] : moving) {
      Chunk& c = range.chunks[i];
      uint64_t size = range.size_of(i);
      CUresult u = r == CUDA_SUCCESS ? call_real(GMS_REAL(cuMemUnmap), va + range.offset_of(i), static_cast<size_t>(size)) : r;
      if (u != CUDA_SUCCESS) {
        give_host(s, h);
        fail("eviction", u, size);
        continue;
      }
      CUresult m = map(va + range.offset_of(i), size, h.handle, range.dev);
      if (m != CUDA_SUCCESS) {
        // Put the device memory back: it still holds the data.
        give_host(s, h);
        if (map(va + range.offset_of(i), size, c.device, range.dev) != CUDA_SUCCESS) {
          Line l;
          l.str("swap: could not map ").bytes(size).str(" back at ").hex(va + range.offset_of(i)).str(": that part of the range is gone");
          log(LogLevel::error, l);
        }
        fail("eviction", m, size);
        continue;
      }
      call_real(GMS_REAL(cuMemRelease), c.device);
      c.device = 0;
      c.host = h;
    }
    return first;
  }

  // In: nothing queued may be using the host-backed chunks while their backing changes; then the
  // range is backed by new device memory and filled from the host copy, which is kept until the
  // copies are done.
  std::vector<size_t> moving;
  for (size_t i = from; i < to; ++i) {
    if (!range.chunks[i].device) moving.push_back(i);
  }
  if (moving.empty()) return CUDA_SUCCESS;
  CUresult r = call_real(GMS_REAL(cuCtxSynchronize));
  if (r != CUDA_SUCCESS) {
    fail("prefetch", r, bytes);
    return first;
  }
  std::vector<HostChunk> done;
  for (size_t i : moving) {
    Chunk& c = range.chunks[i];
    uint64_t off = range.offset_of(i), size = range.size_of(i);
    CUmemGenericAllocationHandle d = 0;
    CUmemAllocationProp p = prop(false, range.dev);
    r = call_real(GMS_REAL(cuMemCreate), &d, static_cast<size_t>(size), &p, 0ull);
    if (r != CUDA_SUCCESS) {
      fail("prefetch", r, size);  // the device is full: this chunk stays on the host
      continue;
    }
    r = call_real(GMS_REAL(cuMemUnmap), va + off, static_cast<size_t>(size));
    if (r == CUDA_SUCCESS) {
      r = map(va + off, size, d, range.dev);
      if (r != CUDA_SUCCESS && map(va + off, size, c.host.handle, range.dev) != CUDA_SUCCESS) {
        Line l;
        l.str("swap: could not map ").bytes(size).str(" back at ").hex(va + off).str(": that part of the range is gone");
        log(LogLevel::error, l);
      }
    }
    if (r == CUDA_SUCCESS) r = copy(va + off, c.host.side, size, stream, per_thread);
    if (r != CUDA_SUCCESS) {
      call_real(GMS_REAL(cuMemRelease), d);
      fail("prefetch", r, size);
      continue;
    }
    done.push_back(c.host);
    c.host = {};
    c.device = d;
  }
  if (!done.empty()) {
    // Other streams may use the chunks next: the copies must be over before anyone launches.
    r = per_thread ? call_real(GMS_REAL(cuStreamSynchronize_ptsz), stream) : call_real(GMS_REAL(cuStreamSynchronize), stream);
    if (r != CUDA_SUCCESS) fail("prefetch", r, bytes);
    for (const HostChunk& h : done) give_host(s, h);
  }
  return first;
}

}  // namespace gms::act::swap
