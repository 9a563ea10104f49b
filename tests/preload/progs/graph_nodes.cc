// Memory nodes a program adds to a graph by hand (cuGraphAddMemAllocNode, cuGraphAddMemFreeNode,
// cuGraphAddNode and its _v2), over the stand-in driver. Run with GPUMEMSHIM_DEVICE_LIMIT=16M and a
// managed cap of 64M; argv[1] is the policy the runner set ("auto", "spill" or "off"), last on the
// command line. Checks:
// - within the budget an allocation node is the program's own, counted from the node's making
//   (cuMemGetInfo's free shrinks by it) until its free node is added;
// - past the budget: under spill host memory made outside the graph, with an empty node in the
//   allocation's place (cuGraphMemAllocNodeGetParams still answers with the address and size), its
//   free node empty too, and every byte written reads back; under auto device memory as far as the
//   card allows (the graph cannot move memory to make room); under off the driver's out-of-memory;
// - cuGraphAddNode (both versions) with a memory node's parameters goes the same way;
// - bad arguments get the driver's own error.
#include <cstring>
#include <vector>

#include "common.h"

namespace {

constexpr size_t MiB = 1u << 20;

size_t free_now() { return preload::free_within(16 * MiB); }

CUDA_MEM_ALLOC_NODE_PARAMS params(size_t bytes) {
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  p.bytesize = bytes;
  return p;
}

void fill_and_check(CUdeviceptr p, size_t n, unsigned char v) {
  std::vector<unsigned char> in(n, v), out(n, 0);
  CK(cuMemcpyHtoD(p, in.data(), n));
  CK(cuMemcpyDtoH(out.data(), p, n));
  CHECK(std::memcmp(in.data(), out.data(), n) == 0);
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc >= 2);
  const char* policy = argv[argc - 1];
  const bool off = std::strcmp(policy, "off") == 0, spill = std::strcmp(policy, "spill") == 0;
  preload::use_device0();
  const size_t f0 = free_now();
  CUgraph g = nullptr;
  CK(cuGraphCreate(&g, 0));

  // Within the budget: the program's own node, counted.
  CUDA_MEM_ALLOC_NODE_PARAMS a = params(10 * MiB);
  CUgraphNode na = nullptr;
  CK(cuGraphAddMemAllocNode(&na, g, nullptr, 0, &a));
  CHECK(fake_cuda_node_type(na) == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  CHECK(a.dptr != 0);
  CHECK(free_now() == f0 - 10 * MiB);
  fill_and_check(a.dptr, 10 * MiB, 1);

  // 10 + 8 > 16: past the budget.
  const unsigned long managed0 = fake_cuda_calls("cuMemAllocManaged");
  CUDA_MEM_ALLOC_NODE_PARAMS b = params(8 * MiB);
  CUgraphNode nb = nullptr;
  CUresult r = cuGraphAddMemAllocNode(&nb, g, &na, 1, &b);
  if (off) {
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
  } else {
    CHECK(r == CUDA_SUCCESS);
    CHECK(b.dptr != 0);
    fill_and_check(b.dptr, 8 * MiB, 2);
    if (spill) {
      CHECK(fake_cuda_node_type(nb) == CU_GRAPH_NODE_TYPE_EMPTY);
      CHECK(fake_cuda_calls("cuMemAllocManaged") == managed0 + 1);
      CHECK(free_now() == f0 - 10 * MiB);  // host memory: not the device's
      CUDA_MEM_ALLOC_NODE_PARAMS got{};
      CK(cuGraphMemAllocNodeGetParams(nb, &got));
      CHECK(got.dptr == b.dptr && got.bytesize == 8 * MiB);
    } else {
      CHECK(fake_cuda_node_type(nb) == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
      CHECK(fake_cuda_calls("cuMemAllocManaged") == managed0);
    }
    CUgraphNode fb = nullptr;
    CK(cuGraphAddMemFreeNode(&fb, g, &nb, 1, b.dptr));
    CHECK(fake_cuda_node_type(fb) == (spill ? CU_GRAPH_NODE_TYPE_EMPTY : CU_GRAPH_NODE_TYPE_MEM_FREE));
  }
  CUDA_MEM_ALLOC_NODE_PARAMS got{};
  CK(cuGraphMemAllocNodeGetParams(na, &got));
  CHECK(got.dptr == a.dptr);

  // The free node gives the room back.
  CUgraphNode fa = nullptr;
  CK(cuGraphAddMemFreeNode(&fa, g, &na, 1, a.dptr));
  CHECK(fake_cuda_node_type(fa) == CU_GRAPH_NODE_TYPE_MEM_FREE);
  CHECK(free_now() == f0);

  // cuGraphAddNode, both versions: 12 MiB within the budget, then 6 MiB past it.
  CUgraphNodeParams p1{};
  p1.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  CUDA_MEM_ALLOC_NODE_PARAMS a1 = params(12 * MiB);
  std::memcpy(&p1.alloc, &a1, sizeof a1);
  // The first version, as a program built against CUDA 12.2 reaches it (cuda.h names the _v2).
  void* v1 = nullptr;
  CUdriverProcAddressQueryResult found{};
  CK(cuGetProcAddress_v2("cuGraphAddNode", &v1, 12020, 0, &found));
  CHECK(v1 != nullptr);
  auto add_node_v1 = reinterpret_cast<PFN_cuGraphAddNode_v12020>(v1);
  CUgraphNode n1 = nullptr;
  CK(add_node_v1(&n1, g, nullptr, 0, &p1));
  CHECK(fake_cuda_node_type(n1) == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  CHECK(free_now() == f0 - 12 * MiB);
  CUgraphNodeParams p2 = p1;
  p2.alloc.bytesize = 6 * MiB;
  p2.alloc.dptr = 0;
  CUgraphNode n2 = nullptr;
  r = cuGraphAddNode_v2(&n2, g, &n1, nullptr, 1, &p2);
  if (off) {
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
  } else {
    CHECK(r == CUDA_SUCCESS);
    fill_and_check(p2.alloc.dptr, 6 * MiB, 3);
    CHECK(fake_cuda_node_type(n2) == (spill ? CU_GRAPH_NODE_TYPE_EMPTY : CU_GRAPH_NODE_TYPE_MEM_ALLOC));
    CUgraphNodeParams f2{};
    f2.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    f2.free.dptr = p2.alloc.dptr;
    CUgraphNode nf2 = nullptr;
    CK(add_node_v1(&nf2, g, &n2, 1, &f2));
    CHECK(fake_cuda_node_type(nf2) == (spill ? CU_GRAPH_NODE_TYPE_EMPTY : CU_GRAPH_NODE_TYPE_MEM_FREE));
  }
  CUgraphNodeParams f1{};
  f1.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  f1.free.dptr = p1.alloc.dptr;
  CUgraphNode nf1 = nullptr;
  CK(cuGraphAddNode_v2(&nf1, g, &n1, nullptr, 1, &f1));
  CHECK(free_now() == f0);

  // Bad arguments: the driver's own errors.
  CUDA_MEM_ALLOC_NODE_PARAMS zero = params(0);
  CUgraphNode nz = nullptr;
  CHECK_RESULT(cuGraphAddMemAllocNode(&nz, g, nullptr, 0, &zero), CUDA_ERROR_INVALID_VALUE);
  CHECK_RESULT(cuGraphAddMemAllocNode(&nz, g, nullptr, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEM_ALLOC_NODE_PARAMS big = params(40 * MiB);
  CHECK_RESULT(cuGraphAddMemAllocNode(nullptr, g, nullptr, 0, &big), CUDA_ERROR_INVALID_VALUE);
  CHECK(free_now() == f0);
  CK(cuGraphDestroy(g));
  std::printf("graph nodes ok (%s)\n", policy);
  return 0;
}
