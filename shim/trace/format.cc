// Records to JSON lines (FORMAT.md, "Event lines"). Runs on the writer's side only.
#include "format.h"

#include "names.h"
#include "out.h"
#include "sites.h"

namespace gms::trace {
namespace {

const char* direction_name(uint8_t d) {
  switch (static_cast<Direction>(d)) {
#define GMS_X(id, doc) \
  case Direction::id:  \
    return #id;
    GMS_DIRECTIONS(GMS_X)
#undef GMS_X
  }
  return "unknown";
}

const char* host_kind_name(uint8_t k) {
  switch (static_cast<HostKind>(k)) {
#define GMS_X(id, doc) \
  case HostKind::id:   \
    return #id;
    GMS_HOST_KINDS(GMS_X)
#undef GMS_X
  }
  return "unknown";
}

const char* copy_path_name(uint8_t p) {
  switch (static_cast<CopyPath>(p)) {
    case CopyPath::driver:
      return "driver";
    case CopyPath::registered:
      return "registered";
    case CopyPath::staged:
      return "staged";
    case CopyPath::host:
      return "host";
  }
  return "driver";
}

// The call that made a region go away, by the statistics family of the free.
const char* free_api(uint8_t f) {
  switch (static_cast<Family>(f)) {
    case Family::mem_free:
      return "cuMemFree";
    case Family::host_free:
      return "cuMemFreeHost";
    case Family::host_unregister:
      return "cuMemHostUnregister";
    case Family::vmm:
      return "cuMemUnmap";
    default:
      return "unknown";
  }
}

const char* memcpy_kind_name(uint8_t k) {
  static const char* const kNames[] = {"htod", "dtoh", "dtod", "htoh", "peer", "unknown"};
  return k < sizeof(kNames) / sizeof(kNames[0]) ? kNames[k] : "unknown";
}

const char* memory_kind_name(uint8_t k) {
  static const char* const kNames[] = {"pageable", "pinned", "device", "managed", "array", "unknown"};
  return k < sizeof(kNames) / sizeof(kNames[0]) ? kNames[k] : "unknown";
}

const char* um_counter_name(uint8_t k) {
  static const char* const kNames[] = {"htod",      "dtoh",      "dtod",       "gpu_fault", "cpu_fault",
                                       "thrashing", "throttling", "remote_map", "unknown"};
  return k < sizeof(kNames) / sizeof(kNames[0]) ? kNames[k] : "unknown";
}

const char* um_cause_name(uint8_t k) {
  static const char* const kNames[] = {"user_prefetch", "coherence", "speculative", "eviction", "access_counter",
                                       "unknown"};
  return k < sizeof(kNames) / sizeof(kNames[0]) ? kNames[k] : "unknown";
}

const char* um_access_name(uint8_t k) {
  static const char* const kNames[] = {"read", "write", "atomic", "prefetch", "unknown"};
  return k < sizeof(kNames) / sizeof(kNames[0]) ? kNames[k] : "unknown";
}

const char* str_or(uint64_t p, const char* fallback) {
  return p ? reinterpret_cast<const char*>(static_cast<uintptr_t>(p)) : fallback;
}

Out& start(Out& out, const char* type, const Record& r) { return out.open(type).key("t").i64(r.t); }

Out& end_key(Out& out, const Record& r) { return out.key("end").i64(static_cast<int64_t>(r.v[0])); }

Out& name_key(Out& out, const char* key, uint64_t id) {
  const char* s = names::name(static_cast<uint32_t>(id));
  return out.key(key).str(s ? s : (id ? "?" : nullptr));
}

}  // namespace

void format_record(Out& out, const Record& r) {
  switch (r.type) {
    case Type::alloc:
      if (r.v[2]) sites::write_once(out, static_cast<uint32_t>(r.v[2]));
      start(out, "alloc", r).key("ptr").addr(r.v[0]).key("bytes").u64(r.v[1]).key("device").i64(r.device);
      out.key("api").str(origin_name(static_cast<Origin>(r.k3)));
      out.key("kind").str(mem_kind_name(static_cast<MemKind>(r.k1)));
      out.key("placement").str(placement_name(static_cast<Placement>(r.k2)));
      if (r.v[2]) out.key("site").u64(r.v[2]);
      break;
    case Type::free:
      start(out, "free", r).key("ptr").addr(r.v[0]).key("bytes").u64(r.v[1]).key("api").str(free_api(r.k1));
      break;
    case Type::copy:
      start(out, "copy", r).key("api").str(str_or(r.v[2], nullptr)).key("bytes").u64(r.v[0]);
      out.key("dir").str(direction_name(r.k1));
      if (r.k2 != kNone) out.key("host_kind").str(host_kind_name(r.k2));
      out.key("path").str(copy_path_name(r.k3)).key("dur_ns").u64(r.v[1]);
      break;
    case Type::decision:
      start(out, "decision", r).key("what").str(str_or(r.v[2], "unknown")).key("ptr").addr(r.v[0]);
      out.key("bytes").u64(r.v[1]).key("device").i64(r.device).key("reason").str(str_or(r.v[3], nullptr));
      break;
    case Type::budget:
      start(out, "budget", r).key("device").i64(r.device).key("limit").u64(r.v[0]).key("used").u64(r.v[1]);
      out.key("resident").u64(r.v[2]);
      break;
    case Type::host_register:
      start(out, "register", r).key("ptr").addr(r.v[0]).key("bytes").u64(r.v[1]).key("dur_ns").u64(r.v[2]);
      out.key("result").str(str_or(r.v[3], "ok")).key("why").str(str_or(r.v[4], "auto"));
      break;
    case Type::host_unregister:
      start(out, "unregister", r).key("ptr").addr(r.v[0]).key("bytes").u64(r.v[1]).key("dur_ns").u64(r.v[2]);
      out.key("why").str(str_or(r.v[3], "evict"));
      break;
    case Type::cache:
      start(out, "cache", r).key("hits").u64(r.v[0]).key("misses").u64(r.v[1]).key("evictions").u64(r.v[2]);
      out.key("invalidations").u64(r.v[3]).key("bytes").u64(r.v[4]);
      break;
    case Type::kernel:
      start(out, "kernel", r);
      end_key(out, r);
      name_key(out, "name", r.v[1]).key("device").i64(r.device).key("stream").u64(r.v[2]);
      out.key("correlation").u64(r.v[3]);
      out.key("grid").chr('[').u64(r.v[4]).chr(',').u64(r.v[5]).chr(',').u64(r.v[6]).chr(']');
      out.key("block").chr('[').u64(r.v[7]).chr(',').u64(r.v[8]).chr(',').u64(r.v[9]).chr(']');
      break;
    case Type::memcpy:
      start(out, "memcpy", r);
      end_key(out, r).key("bytes").u64(r.v[1]).key("copy_kind").str(memcpy_kind_name(r.k1));
      out.key("src_kind").str(memory_kind_name(r.k2)).key("dst_kind").str(memory_kind_name(r.k3));
      out.key("device").i64(r.device).key("stream").u64(r.v[2]).key("correlation").u64(r.v[3]);
      break;
    case Type::memset:
      start(out, "memset", r);
      end_key(out, r).key("bytes").u64(r.v[1]).key("device").i64(r.device).key("stream").u64(r.v[2]);
      break;
    case Type::um:
      start(out, "um", r);
      end_key(out, r).key("counter").str(um_counter_name(r.k1)).key("address").addr(r.v[1]);
      out.key("bytes").u64(r.v[2]).key("value").u64(r.v[3]);
      if (r.k2 != kNone) out.key("cause").str(um_cause_name(r.k2));
      if (r.k3 != kNone) out.key("access").str(um_access_name(r.k3));
      out.key("device").i64(r.device);
      break;
    case Type::launch:
      start(out, "launch", r).key("seq").u64(r.v[0]).key("stream").addr(r.v[1]).key("fn").addr(r.v[2]);
      if (r.k1 == 1) out.key("part").u64(1);
      out.key("regions").chr('[');
      for (uint64_t k = 0; k < r.v[4] && k < 8; ++k) {
        if (k) out.chr(',');
        out.addr(r.v[5 + k]);
      }
      out.chr(']');
      break;
    case Type::pages: {
      static const char* const kAt[] = {"launch", "sync", "free", "exit"};
      start(out, "pages", r).key("ptr").addr(r.v[0]).key("to_gpu").u64(r.v[1]).key("to_cpu").u64(r.v[2]);
      out.key("cpu").u64(r.v[3]).key("at").str(r.k1 < 4 ? kAt[r.k1] : "unknown");
      break;
    }
    case Type::census:
      start(out, "census", r).key("state").str(str_or(r.v[0], "unknown")).key("why").str(str_or(r.v[1], nullptr));
      break;
    case Type::range:
      start(out, "range", r);
      end_key(out, r);
      name_key(out, "name", r.v[1]);
      name_key(out, "domain", r.v[2]).key("tid").u64(r.v[3]);
      break;
  }
  out.close();
}

}  // namespace gms::trace
