#include "arrays.h"

#include <algorithm>

namespace gms::policy {
namespace {

// Bytes a texel of `format` takes, times 16 (block-compressed formats pack 16 texels into 8 or 16
// bytes, 4:2:0 video formats carry 1.5 bytes a texel); `channels` counts for the plain formats.
uint64_t texel_bytes_x16(uint32_t format, uint32_t channels) {
  const uint64_t c = std::max<uint32_t>(channels, 1);
  switch (format) {
    case 0x01: case 0x08: return 16 * c;       // 8-bit integers
    case 0x02: case 0x09: case 0x10: return 32 * c;  // 16-bit integers, half
    case 0x03: case 0x0a: case 0x20: return 64 * c;  // 32-bit integers, float
    case 0xc0: case 0xc6: return 16;            // UNORM/SNORM INT8X1
    case 0xc1: case 0xc7: case 0xc3: case 0xc9: return 32;  // INT8X2, INT16X1
    case 0xc2: case 0xc8: case 0xc4: case 0xca: return 64;  // INT8X4, INT16X2
    case 0xc5: case 0xcb: return 128;           // INT16X4
    case 0x50: return 64;                       // R10G10B10A2
    case 0x91: case 0x92: case 0x97: case 0x98: return 8;  // BC1, BC4: 8 bytes a 4x4 block
    case 0x93: case 0x94: case 0x95: case 0x96: case 0x99: case 0x9a: case 0x9b: case 0x9c: case 0x9d: case 0x9e:
      return 16;                                // BC2, BC3, BC5, BC6H, BC7: 16 bytes a block
    case 0xb0: return 24;                       // NV12: 1.5 bytes a texel
    case 0x9f: case 0xa1: return 48;            // P010, P016: 3 bytes
    case 0xa2: case 0xa5: return 32;            // NV16, YUY2: 2 bytes
    case 0xa3: case 0xa4: case 0xa6: case 0xa7: return 64;  // P210, P216, Y210, Y216
    case 0xa8: case 0xa9: return 64;            // AYUV, Y410
    case 0xb1: return 128;                      // Y416
    case 0xb2: case 0xb4: return 48;            // 8-bit 4:4:4
    case 0xb3: case 0xb5: return 96;            // 10/16-bit 4:4:4
    default: return 64 * c;
  }
}

}  // namespace

uint64_t array_bytes(const ArrayShape& a) {
  if (a.flags & (kArraySparse | kArrayDeferred)) return 0;
  const bool layered = a.flags & (kArrayLayered | kArrayCubemap);
  uint64_t texels = 0;
  const uint32_t levels = std::clamp<uint32_t>(a.levels, 1, 64);
  for (uint32_t l = 0; l < levels; ++l) {
    const uint64_t w = std::max<uint64_t>(a.width >> l, 1), h = std::max<uint64_t>(a.height >> l, 1);
    const uint64_t d = layered ? std::max<uint64_t>(a.depth, 1) : std::max<uint64_t>(a.depth >> l, 1);
    texels += w * h * d;
    if (a.width >> l <= 1 && a.height >> l <= 1 && (layered || a.depth >> l <= 1)) break;
  }
  return (texels * texel_bytes_x16(a.format, a.channels) + 15) / 16;
}

Placement place_array(const PlacementConfig& cfg, const DeviceBudget& budget, uint64_t bytes) {
  const bool fits = budget.used <= budget.limit && bytes <= budget.limit - budget.used;
  if (fits) return {Where::device, "within budget"};
  if (cfg.policy == PolicyKind::off && !cfg.limit_enforced) return {Where::device, "policy off"};
  return {Where::out_of_memory, "over budget, and it cannot be host memory"};
}

}  // namespace gms::policy
