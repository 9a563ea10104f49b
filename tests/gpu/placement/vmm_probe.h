#pragma once
// What the VMM probes of this folder share (vmm_access.cu, vmm_gate.cu): error checks that end
// main with 1, timing, and VMM memory of device 0 mapped for it.
#include <cuda.h>
#include <chrono>
#include <cstdio>
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = nullptr; cuGetErrorName(r_, &s_); std::printf("%s: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); return 1; } } while (0)
constexpr size_t MiB = 1ull << 20, kChunk = 64 * MiB;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
CUmemAllocationProp prop_of(bool host) { CUmemAllocationProp p{}; p.type = CU_MEM_ALLOCATION_TYPE_PINNED; p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = 0; return p; }
int access(CUdeviceptr va, size_t n) { CUmemAccessDesc d{}; d.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}; d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; CU(cuMemSetAccess(va, n, &d, 1)); return 0; }
int vmm(CUdeviceptr* va, size_t n, bool host) { CUmemAllocationProp p = prop_of(host); CUmemGenericAllocationHandle h; CU(cuMemCreate(&h, n, &p, 0)); CU(cuMemAddressReserve(va, n, 0, 0, 0)); CU(cuMemMap(*va, n, 0, h, 0)); return access(*va, n); }
