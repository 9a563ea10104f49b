// The correctness rules of placement on a real GPU (issue 3), run under GPUMEMSHIM_POLICY=spill with
// a 64 MiB device limit (GPU safety: at most about 400 MiB of managed memory):
// - spilled memory is what the driver says it is: cudaPointerGetAttributes calls it managed, and an
//   IPC handle on it fails with the driver's own error for managed memory;
// - a stream capture that uses spilled memory, allocates on the stream and frees spilled memory on
//   the stream ends cleanly, and its graph computes the right thing;
// - a graph memory node past the budget (96 MiB) gets host memory made outside the graph, and three
//   replays of the graph compute the right thing; the same for a graph built by hand
//   (cudaGraphAddMemAllocNode), whose allocation node becomes an empty node;
// - spilled memory freed on a stream right after a kernel that writes it: no error, right data.
// Prints "ok", or what went wrong and exits 1.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "checks.cuh"

int main() {
  const size_t MiB = 1 << 20, n = 128 * MiB / sizeof(float);
  float *big = nullptr, *gone = nullptr, *later = nullptr;
  CHECK(cudaMalloc(&big, n * sizeof(float)));  // past the 64 MiB budget: spilled
  cudaPointerAttributes at{};
  CHECK(cudaPointerGetAttributes(&at, big));
  EXPECT(at.type == cudaMemoryTypeManaged);

  // The driver's own answer for an IPC handle on managed memory, and the one on spilled memory.
  float* own = nullptr;
  CHECK(cudaMallocManaged(&own, MiB));
  cudaIpcMemHandle_t h;
  cudaError_t want = cudaIpcGetMemHandle(&h, own);
  cudaGetLastError();
  cudaError_t got = cudaIpcGetMemHandle(&h, big);
  cudaGetLastError();
  EXPECT(want != cudaSuccess);
  EXPECT(got == want);
  CHECK(cudaFree(own));

  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaMalloc(&gone, n * sizeof(float)));  // spilled too; the graph frees it
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  float* tmp = nullptr;
  CHECK(cudaMallocAsync(&tmp, 4 * MiB, s));  // within the budget: the graph's own device memory
  fill<<<256, 256, 0, s>>>(tmp, 4 * MiB / sizeof(float), 1.0f);
  fill<<<1024, 256, 0, s>>>(gone, n, 2.0f);
  add<<<1024, 256, 0, s>>>(big, gone, gone, n);
  add<<<256, 256, 0, s>>>(big, big, tmp, 4 * MiB / sizeof(float));
  CHECK(cudaFreeAsync(tmp, s));
  CHECK(cudaFreeAsync(gone, s));
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  std::vector<float> back(n);
  CHECK(cudaMemcpy(back.data(), big, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i += 4099) {
    float expect = i < 4 * MiB / sizeof(float) ? 5.0f : 4.0f;
    if (back[i] != expect) {
      std::printf("graph result at %zu: %g, expected %g\n", i, back[i], expect);
      return 1;
    }
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));

  // A graph memory node past the budget: host memory made outside the graph (spill's promise of no
  // out-of-memory), which every replay uses; the graph's own free leaves it to the replays.
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const size_t m = 96 * MiB / sizeof(float);
  float* past = nullptr;
  CHECK(cudaMallocAsync(&past, m * sizeof(float), s));
  fill<<<1024, 256, 0, s>>>(past, m, 1.0f);
  add<<<1024, 256, 0, s>>>(big, big, past, m);
  CHECK(cudaFreeAsync(past, s));
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 3; ++r) CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(back.data(), big, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i += 4099) {
    float expect = (i < 4 * MiB / sizeof(float) ? 5.0f : 4.0f) + (i < m ? 3.0f : 0.0f);
    if (back[i] != expect) {
      std::printf("replayed graph result at %zu: %g, expected %g\n", i, back[i], expect);
      return 1;
    }
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));

  // The same graph built by hand, as CUDA's sample graphMemoryNodes builds one
  // (cudaGraphAddMemAllocNode, kernel nodes, cudaGraphAddMemFreeNode): past the budget, host memory
  // made outside the graph, an empty node in the allocation's place; the node still answers with
  // its address. Within the budget (4 MiB) the graph's own node.
  {
    int dev = 0;
    CHECK(cudaGetDevice(&dev));
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams ap{};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = dev;
    ap.bytesize = m * sizeof(float);
    cudaGraphNode_t alloc_node, small_node, fill_node, add_node, free_node, small_free;
    CHECK(cudaGraphAddMemAllocNode(&alloc_node, g, nullptr, 0, &ap));
    cudaMemAllocNodeParams small = ap;
    small.bytesize = 4 * MiB;
    small.dptr = nullptr;
    CHECK(cudaGraphAddMemAllocNode(&small_node, g, &alloc_node, 1, &small));
    cudaMemAllocNodeParams got{};
    CHECK(cudaGraphMemAllocNodeGetParams(alloc_node, &got));
    EXPECT(got.dptr == ap.dptr && got.bytesize == ap.bytesize);
    float* hand = static_cast<float*>(ap.dptr);
    size_t count = m;
    float one = 1.0f;
    void* fill_args[] = {&hand, &count, &one};
    cudaKernelNodeParams kp{};
    kp.func = reinterpret_cast<void*>(fill);
    kp.gridDim = dim3(1024);
    kp.blockDim = dim3(256);
    kp.kernelParams = fill_args;
    CHECK(cudaGraphAddKernelNode(&fill_node, g, &small_node, 1, &kp));
    void* add_args[] = {&big, &big, &hand, &count};
    kp.func = reinterpret_cast<void*>(add);
    kp.kernelParams = add_args;
    CHECK(cudaGraphAddKernelNode(&add_node, g, &fill_node, 1, &kp));
    CHECK(cudaGraphAddMemFreeNode(&free_node, g, &add_node, 1, ap.dptr));
    CHECK(cudaGraphAddMemFreeNode(&small_free, g, &free_node, 1, small.dptr));
    cudaGraphExec_t ge;
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < 3; ++r) CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(back.data(), big, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += 4099) {
      float expect = (i < 4 * MiB / sizeof(float) ? 5.0f : 4.0f) + (i < m ? 6.0f : 0.0f);
      if (back[i] != expect) {
        std::printf("graph built by hand, result at %zu: %g, expected %g\n", i, back[i], expect);
        return 1;
      }
    }
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
  }

  // Outside a capture: a kernel writes spilled memory, which is freed on the stream at once.
  CHECK(cudaMalloc(&later, n * sizeof(float)));
  fill<<<1024, 256, 0, s>>>(later, n, 6.0f);
  add<<<1024, 256, 0, s>>>(big, later, later, n);
  CHECK(cudaFreeAsync(later, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(back.data(), big, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i += 4099) EXPECT(back[i] == 12.0f);
  CHECK(cudaFree(big));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaGetLastError());
  std::printf("ok\n");
  return 0;
}
