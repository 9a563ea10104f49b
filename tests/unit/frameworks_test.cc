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

}  // namespace
}  // namespace gms::policy
