#pragma once
// The checksum of a chunk of movable memory (act/swap/sums.h says what it is for): two 64-bit
// lanes, each the sum, modulo 2^64, over the chunk's 8-byte words of a bijective mix of the word
// and its place. A change to any one word changes both lanes, always (each term is a bijection of
// its word); changes to several leave both unchanged with odds of about 2^-128; moved or swapped
// words change them (each term depends on its place). Plain integer code, compiled for the GPU
// (sums.cu) and for the stand-in driver's kernel (tests/preload/fake), which must agree.
#include <cstdint>

#if defined(__CUDACC__)
#define GMS_SUM_FN __host__ __device__ inline
#else
#define GMS_SUM_FN inline
#endif

namespace gms::act::swap::sum {

// SplitMix64's finaliser: a bijection of 64-bit words with full avalanche.
GMS_SUM_FN uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

GMS_SUM_FN uint64_t lane_a(uint64_t word, uint64_t i) { return mix(word + (i + 1) * 0x9e3779b97f4a7c15ull); }
GMS_SUM_FN uint64_t lane_b(uint64_t word, uint64_t i) { return mix((word ^ 0x632be59bd9b4e019ull) * 0xd1b54a32d192ed03ull + i); }
// Added once to each lane: the sum's salt, new for every chunk brought in and used again by its
// check, so that a sum landing late in a slot reused since can never match another chunk's.
GMS_SUM_FN uint64_t salt_a(uint64_t salt) { return mix(salt ^ 0x2545f4914f6cdd1dull); }
GMS_SUM_FN uint64_t salt_b(uint64_t salt) { return mix(salt + 0x7f4a7c159e3779b9ull); }

// A chunk is summed piece by piece (2 MiB, the driver's mapping granularity), so that an eviction
// copies out only the pieces that changed: a chunk holds allocations with different futures, and
// one written piece no longer costs the copy of the whole chunk.
constexpr uint64_t kPiece = 2ull << 20;
constexpr unsigned kMaxPieces = 32;  // the largest chunk, 64 MiB
constexpr unsigned pieces(uint64_t bytes) { return static_cast<unsigned>((bytes + kPiece - 1) / kPiece); }

// The kernel's name in the module (sums.cu) and its shape, one row of blocks a piece (gridDim.y):
// piece k's lanes are added into out[2k] and out[2k + 1], which must be zero first; each word's
// place i counts from the chunk's start, and each piece is salted.
//   gms_chunk_sum(const uint64_t* words, uint64_t n, uint64_t* out, uint64_t salt, uint64_t piece_words)
constexpr const char* kKernel = "gms_chunk_sum";
constexpr unsigned kThreads = 256;  // a multiple of the warp: the kernel reduces warp by warp

}  // namespace gms::act::swap::sum
