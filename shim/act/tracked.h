#pragma once
// What every fast check of the hooks asks first about the managed and movable memory the residency
// planner tracks (act/residency.h): how many regions, and the span of their addresses (a word
// outside it points into none). Written only by act/residency.cc.
#include <atomic>
#include <cstdint>

namespace gms::act {

inline std::atomic<uint64_t> g_tracked_regions{0};
inline std::atomic<uintptr_t> g_tracked_lo{~uintptr_t{0}};
inline std::atomic<uintptr_t> g_tracked_hi{0};

}  // namespace gms::act
