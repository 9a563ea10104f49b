#include "policy/arrays.h"

#include <gtest/gtest.h>

namespace gms::policy {
namespace {

TEST(ArrayBytes, PlainFormatsCountChannels) {
  ArrayShape a;
  a.width = 1024;
  a.height = 512;
  a.format = 0x20;  // float
  a.channels = 4;
  EXPECT_EQ(array_bytes(a), 1024u * 512 * 16);
  a.height = 0;  // one-dimensional
  EXPECT_EQ(array_bytes(a), 1024u * 16);
  a.format = 0x01;  // 8-bit
  a.channels = 1;
  a.height = 100;
  a.depth = 10;
  EXPECT_EQ(array_bytes(a), 1024u * 100 * 10);
}

TEST(ArrayBytes, PackedAndCompressedFormats) {
  ArrayShape a;
  a.width = 256;
  a.height = 256;
  a.channels = 3;     // ignored: the format says
  a.format = 0xc5;    // UNORM_INT16X4: 8 bytes a texel
  EXPECT_EQ(array_bytes(a), 256u * 256 * 8);
  a.format = 0x91;    // BC1: 8 bytes a 4x4 block
  EXPECT_EQ(array_bytes(a), 256u * 256 / 2);
  a.format = 0xb0;    // NV12: 1.5 bytes a texel
  EXPECT_EQ(array_bytes(a), 256u * 256 * 3 / 2);
  a.format = 0x7777;  // unknown: four bytes a channel
  EXPECT_EQ(array_bytes(a), 256u * 256 * 12);
}

TEST(ArrayBytes, MipLevelsAddUpAndLayersDoNotShrink) {
  ArrayShape a;
  a.width = 8;
  a.height = 8;
  a.format = 0x01;
  a.levels = 10;  // 8x8, 4x4, 2x2, 1x1 and no further
  EXPECT_EQ(array_bytes(a), 64u + 16 + 4 + 1);
  a.depth = 8;  // 3D: depth halves too
  EXPECT_EQ(array_bytes(a), 512u + 64 + 8 + 1);
  a.flags = kArrayLayered;  // 8 layers of each level
  EXPECT_EQ(array_bytes(a), 8u * (64 + 16 + 4 + 1));
  a.flags = kArrayCubemap;  // six faces of each level
  a.depth = 6;
  EXPECT_EQ(array_bytes(a), 6u * (64 + 16 + 4 + 1));
}

TEST(ArrayBytes, SparseAndDeferredHoldNothingWhenMade) {
  ArrayShape a;
  a.width = a.height = 1024;
  a.format = 0x20;
  a.flags = kArraySparse;
  EXPECT_EQ(array_bytes(a), 0u);
  a.flags = kArrayDeferred;
  EXPECT_EQ(array_bytes(a), 0u);
}

TEST(PlaceArray, WithinTheBudgetOnTheDeviceElseOutOfMemory) {
  PlacementConfig c;
  c.policy = PolicyKind::auto_;
  EXPECT_EQ(place_array(c, {100, 40}, 60).where, Where::device);
  EXPECT_EQ(place_array(c, {100, 40}, 61).where, Where::out_of_memory);
  EXPECT_EQ(place_array(c, {100, 120}, 1).where, Where::out_of_memory);
  c.policy = PolicyKind::spill;
  EXPECT_EQ(place_array(c, {100, 40}, 61).where, Where::out_of_memory);
  c.policy = PolicyKind::off;  // observing only, unless the user set a limit
  EXPECT_EQ(place_array(c, {100, 40}, 61).where, Where::device);
  c.limit_enforced = true;
  EXPECT_EQ(place_array(c, {100, 40}, 61).where, Where::out_of_memory);
}

}  // namespace
}  // namespace gms::policy
