#pragma once
// The fixed-size binary record that travels from a hook (or CUPTI's buffer callback) to the writer
// thread through the ring. Strings are never copied into a record: they are string literals
// (pointers that live as long as the process) or ids of interned names (names.h).
#include <cstdint>

namespace gms::trace {

enum class Type : uint8_t {
  alloc,         // v0 ptr, v1 bytes, v2 site id; k1 MemKind, k2 Placement, k3 Origin; device
  free,          // v0 ptr, v1 bytes; k1 Family
  copy,          // v0 bytes, v1 dur_ns, v2 api (const char*); k1 Direction, k2 HostKind or kNone, k3 CopyPath
  decision,      // v0 ptr, v1 bytes, v2 what, v3 reason (const char*); device
  budget,        // v0 limit, v1 used, v2 resident; device
  host_register,    // v0 ptr, v1 bytes, v2 dur_ns, v3 result, v4 why (const char*)
  host_unregister,  // v0 ptr, v1 bytes, v2 dur_ns, v3 why (const char*)
  cache,         // v0 hits, v1 misses, v2 evictions, v3 invalidations, v4 bytes
  // From CUPTI (t and end on the trace clock):
  kernel,        // v0 end, v1 name id, v2 stream, v3 correlation, v4..v6 grid, v7..v9 block; device
  memcpy,        // v0 end, v1 bytes, v2 stream, v3 correlation; k1 copy kind, k2 src kind, k3 dst kind; device
  memset,        // v0 end, v1 bytes, v2 stream; device
  um,            // v0 end, v1 address, v2 bytes, v3 value; k1 counter, k2 cause, k3 access; device
  range,         // v0 end, v1 name id, v2 domain id, v3 tid
  // The shim's own again (after the CUPTI kinds, so recorded traces keep their numbers):
  launch,        // v0 seq, v1 stream, v2 function, v4 n, v5..v12 region bases; k1 1: continued
  pages,         // v0 region base, v1 bytes to the GPU, v2 bytes back to the CPU, v3 bytes the CPU holds; k1 PagesAt
  census,        // v0 state, v1 reason (const char*)
};

constexpr uint8_t kNone = 0xff;

struct Record {
  Type type;
  uint8_t k1, k2, k3;
  int32_t device;
  int64_t t;  // ns since t0 (negative: before the trace started)
  uint64_t v[13];
};
static_assert(sizeof(Record) == 120, "a ring slot is this plus its sequence word: 128 bytes");

// Small enums of CUPTI records, decoded by the backend into these (the writer knows no CUPTI).
enum class MemcpyKind : uint8_t { htod, dtoh, dtod, htoh, peer, unknown };
enum class MemoryKind : uint8_t { pageable, pinned, device, managed, array, unknown };
enum class UmCounter : uint8_t { htod, dtoh, dtod, gpu_fault, cpu_fault, thrashing, throttling, remote_map, unknown };
enum class UmCause : uint8_t { user_prefetch, coherence, speculative, eviction, access_counter, unknown };
enum class UmAccess : uint8_t { read, write, atomic, prefetch, unknown };

}  // namespace gms::trace
