// The GPU's side of act/swap/sums.h: the checksums of one chunk's pieces (sum_mix.h), compiled to PTX at
// build time and loaded by the shim with cuModuleLoadData (the shim links no CUDA runtime).
#include "sum_mix.h"

using gms::act::swap::sum::lane_a;
using gms::act::swap::sum::lane_b;
using gms::act::swap::sum::salt_a;
using gms::act::swap::sum::salt_b;

extern "C" __global__ void gms_chunk_sum(const unsigned long long* __restrict__ words, unsigned long long n,
                                         unsigned long long* out, unsigned long long salt, unsigned long long piece_words) {
  const bool first = blockIdx.x == 0 && threadIdx.x == 0;
  unsigned long long a = first ? salt_a(salt) : 0, b = first ? salt_b(salt) : 0;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long from = blockIdx.y * piece_words, to = min(n, from + piece_words);
  out += 2 * blockIdx.y;
  for (unsigned long long i = from + blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < to; i += stride) {
    const unsigned long long w = words[i];
    a += lane_a(w, i);
    b += lane_b(w, i);
  }
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_down_sync(0xffffffffu, a, o);
    b += __shfl_down_sync(0xffffffffu, b, o);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(out, a);
    atomicAdd(out + 1, b);
  }
}
