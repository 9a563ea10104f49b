// policy/frameworks.h: PyTorch's allocator settings under a policy that makes movable memory.
#include "policy/frameworks.h"

#include <gtest/gtest.h>

namespace gms::policy {
namespace {

TEST(TorchAllocConf, NothingSetGetsTheAsyncBackend) {
  EXPECT_EQ(torch_alloc_conf(nullptr), "backend:cudaMallocAsync");
}

TEST(TorchAllocConf, ExpandableSegmentsBecomeTheAsyncBackendKeepingTheRest) {
  EXPECT_EQ(torch_alloc_conf("expandable_segments:True"), "backend:cudaMallocAsync");
  EXPECT_EQ(torch_alloc_conf("expandable_segments:true"), "backend:cudaMallocAsync");
  EXPECT_EQ(torch_alloc_conf(" expandable_segments : True "), "backend:cudaMallocAsync");
  EXPECT_EQ(torch_alloc_conf("max_split_size_mb:128,expandable_segments:True,pinned_use_cuda_host_register:True"),
            "max_split_size_mb:128,backend:cudaMallocAsync,pinned_use_cuda_host_register:True");
}

TEST(TorchAllocConf, OtherOptionsGetTheAsyncBackendAdded) {
  EXPECT_EQ(torch_alloc_conf(""), "backend:cudaMallocAsync") << "an empty value is nothing set";
  EXPECT_EQ(torch_alloc_conf("  "), "backend:cudaMallocAsync");
  EXPECT_EQ(torch_alloc_conf("max_split_size_mb:128"), "max_split_size_mb:128,backend:cudaMallocAsync");
  EXPECT_EQ(torch_alloc_conf("expandable_segments:False"), "expandable_segments:False,backend:cudaMallocAsync");
}

TEST(TorchAllocConf, AChosenBackendIsLeftAlone) {
  EXPECT_EQ(torch_alloc_conf("backend:native,expandable_segments:True"), "");
  EXPECT_EQ(torch_alloc_conf("expandable_segments:True,backend:native"), "");
  EXPECT_EQ(torch_alloc_conf("backend:cudaMallocAsync"), "");
  EXPECT_EQ(torch_alloc_conf("expandable_segments"), "") << "no value: PyTorch's business";
}

TEST(XlaFlags, NothingSetTurnsCommandBuffersOff) {
  EXPECT_EQ(xla_flags(nullptr), "--xla_gpu_enable_command_buffer=");
  EXPECT_EQ(xla_flags(""), "--xla_gpu_enable_command_buffer=");
  EXPECT_EQ(xla_flags("   "), "--xla_gpu_enable_command_buffer=");
}

TEST(XlaFlags, OtherFlagsAreKept) {
  EXPECT_EQ(xla_flags("--xla_gpu_autotune_level=0"), "--xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer=");
  EXPECT_EQ(xla_flags(" --a=1  --b=2 "), "--a=1  --b=2 --xla_gpu_enable_command_buffer=");
  EXPECT_EQ(xla_flags("--xla_gpu_enable_command_buffer_extra=1"),
            "--xla_gpu_enable_command_buffer_extra=1 --xla_gpu_enable_command_buffer=")
      << "another flag that starts with the same name";
  EXPECT_EQ(xla_flags("--xla_dump_to=\"/tmp/a b\" --c"), "--xla_dump_to=\"/tmp/a b\" --c --xla_gpu_enable_command_buffer=")
      << "a quoted value with a space is one flag";
}

TEST(XlaFlags, TheProgramsOwnChoiceIsLeftAlone) {
  EXPECT_EQ(xla_flags("--xla_gpu_enable_command_buffer=FUSION,CUBLAS"), "");
  EXPECT_EQ(xla_flags("--xla_gpu_enable_command_buffer="), "");
  EXPECT_EQ(xla_flags("--a=1 --xla_gpu_enable_command_buffer"), "");
  EXPECT_EQ(xla_flags("--xla_gpu_graph_level=2"), "") << "the older flag for command buffers";
}

TEST(XlaFlags, WhatXlaWouldNotReadAfterIsLeftAlone) {
  EXPECT_EQ(xla_flags("/etc/xla.flags"), "") << "a value that does not start with '-' names a file of flags";
  EXPECT_EQ(xla_flags("--a=1 stray"), "") << "XLA stops at a word that is not a flag";
  EXPECT_EQ(xla_flags("-xla_gpu_autotune_level=0"), "") << "one dash is no flag to XLA";
  EXPECT_EQ(xla_flags("--xla_dump_to=\"/tmp/abc"), "") << "an open quote would swallow the added flag";
}

}  // namespace
}  // namespace gms::policy
