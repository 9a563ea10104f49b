// Kernels that reach memory through pointers no launch scan sees: pointer tables in device memory,
// filled by a copy from the host, written by another kernel, and cuBLAS's batched GEMM over arrays
// of matrix pointers. Ten 64 MiB buffers and a budget of a few chunks (the test sets it): between
// the hidden uses, kernels that take the buffers as arguments make the shim move them, so a hidden
// use meets buffers that were just evicted or brought back. The policy must keep the memory mapped
// and coherent for them (never stale, never a fault): every word is checked against what the host
// computed. Prints "ok", or where it failed.
#include <cublas_v2.h>

#include <cstdint>
#include <vector>

#include "checks.cuh"

namespace {

constexpr int kBuffers = 10;
constexpr size_t kBytes = size_t{64} << 20;
constexpr size_t kN = kBytes / sizeof(uint32_t);
constexpr int kRounds = 3;

uint32_t pattern(uint32_t seed, size_t i) { return seed * 2654435761u + static_cast<uint32_t>(i); }

__global__ void set(uint32_t* x, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kN; i += size_t{gridDim.x} * blockDim.x) {
    x[i] = seed * 2654435761u + static_cast<uint32_t>(i);
  }
}

__global__ void bump(uint32_t* x, uint32_t plus) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kN; i += size_t{gridDim.x} * blockDim.x) x[i] += plus;
}

// Every buffer through the table: the only pointers this kernel is given are the table's.
__global__ void bump_via_table(uint32_t* const* table, int n, uint32_t plus) {
  for (int j = 0; j < n; ++j) {
    uint32_t* x = table[j];
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kN; i += size_t{gridDim.x} * blockDim.x) {
      x[i] += plus + static_cast<uint32_t>(j);
    }
  }
}

struct Ten {
  uint32_t* p[kBuffers];
};

// The table written on the GPU, from pointers this kernel is given (and the scan sees here).
__global__ void write_table(uint32_t** table, Ten ten) {
  if (threadIdx.x < kBuffers) table[threadIdx.x] = ten.p[threadIdx.x];
}

int check_all(uint32_t* const* buf, const uint32_t* added, const char* part) {
  std::vector<uint32_t> h(kN);
  for (int j = 0; j < kBuffers; ++j) {
    CHECK(cudaMemcpy(h.data(), buf[j], kBytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < kN; ++i) {
      const uint32_t want = pattern(static_cast<uint32_t>(j + 1), i) + added[j];
      if (h[i] != want) {
        std::printf("%s: buffer %d word %zu is %u, expected %u\n", part, j, i, h[i], want);
        return 1;
      }
    }
  }
  return 0;
}

// Direct uses in an order that makes the shim move every buffer at a budget of a few chunks.
void churn(uint32_t* const* buf, uint32_t* added) {
  for (int j = 0; j < kBuffers; ++j) {
    bump<<<256, 256>>>(buf[j], 1);
    added[j] += 1;
  }
}

int tables(uint32_t* const* buf) {
  uint32_t added[kBuffers] = {};
  for (int j = 0; j < kBuffers; ++j) set<<<256, 256>>>(buf[j], static_cast<uint32_t>(j + 1));
  uint32_t** by_copy = nullptr;
  uint32_t** by_kernel = nullptr;
  CHECK(cudaMalloc(&by_copy, sizeof(uint32_t*) * kBuffers));
  CHECK(cudaMalloc(&by_kernel, sizeof(uint32_t*) * kBuffers));
  CHECK(cudaMemcpy(by_copy, buf, sizeof(uint32_t*) * kBuffers, cudaMemcpyHostToDevice));
  Ten ten;
  for (int j = 0; j < kBuffers; ++j) ten.p[j] = buf[j];
  write_table<<<1, 32>>>(by_kernel, ten);
  for (int r = 0; r < kRounds; ++r) {
    churn(buf, added);
    bump_via_table<<<256, 256>>>(by_copy, kBuffers, 100u * (r + 1));
    for (int j = 0; j < kBuffers; ++j) added[j] += 100u * (r + 1) + j;
    churn(buf, added);
    bump_via_table<<<256, 256>>>(by_kernel, kBuffers, 1000u * (r + 1));
    for (int j = 0; j < kBuffers; ++j) added[j] += 1000u * (r + 1) + j;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  if (check_all(buf, added, "pointer tables")) return 1;
  CHECK(cudaFree(by_copy));
  CHECK(cudaFree(by_kernel));
  return 0;
}

// cuBLAS batched GEMM: C[b] = A[b] * B[b] for matrices that sit in the buffers, the arrays of their
// addresses copied to the device. Small integers: the products are exact in float.
int batched_gemm(uint32_t* const* buf) {
  constexpr int m = 256, batch = kBuffers / 3;  // A, B and C of each product in buffers of their own
  std::vector<float> a(m * m), b(m * m);
  const float* A[batch];
  const float* B[batch];
  float* C[batch];
  for (int k = 0; k < batch; ++k) {
    A[k] = reinterpret_cast<const float*>(buf[3 * k]);
    B[k] = reinterpret_cast<const float*>(buf[3 * k + 1]);
    C[k] = reinterpret_cast<float*>(buf[3 * k + 2]);
    for (int i = 0; i < m * m; ++i) {
      a[i] = static_cast<float>((i * 7 + k) % 5);
      b[i] = static_cast<float>((i * 3 + 2 * k) % 7);
    }
    CHECK(cudaMemcpy(const_cast<float*>(A[k]), a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(const_cast<float*>(B[k]), b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  const float** dA = nullptr;
  const float** dB = nullptr;
  float** dC = nullptr;
  CHECK(cudaMalloc(&dA, sizeof(A)));
  CHECK(cudaMalloc(&dB, sizeof(B)));
  CHECK(cudaMalloc(&dC, sizeof(C)));
  CHECK(cudaMemcpy(dA, A, sizeof(A), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, B, sizeof(B), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dC, C, sizeof(C), cudaMemcpyHostToDevice));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasCreate failed\n");
    return 1;
  }
  const float one = 1.0f;
  uint32_t* spare = buf[kBuffers - 1];
  for (int r = 0; r < kRounds; ++r) {
    // The last buffer (no matrix in it) and then the C's make the shim move the matrices about.
    bump<<<256, 256>>>(spare, 1);
    for (int k = 0; k < batch; ++k) bump<<<256, 256>>>(buf[3 * k + 2], 0);
    const float beta = r == 0 ? 0.0f : 1.0f;
    if (cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, dA, m, dB, m, &beta, dC, m, batch) !=
        CUBLAS_STATUS_SUCCESS) {
      std::printf("cublasSgemmBatched failed\n");
      return 1;
    }
  }
  CHECK(cudaDeviceSynchronize());
  std::vector<float> c(m * m);
  for (int k = 0; k < batch; ++k) {
    for (int i = 0; i < m * m; ++i) {
      a[i] = static_cast<float>((i * 7 + k) % 5);
      b[i] = static_cast<float>((i * 3 + 2 * k) % 7);
    }
    CHECK(cudaMemcpy(c.data(), C[k], c.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int col = 0; col < m; ++col) {
      for (int row = 0; row < m; ++row) {
        float s = 0;
        for (int i = 0; i < m; ++i) s += a[i * m + row] * b[col * m + i];  // column-major
        if (c[col * m + row] != kRounds * s) {
          std::printf("batched GEMM %d: C(%d,%d) is %g, expected %g\n", k, row, col, c[col * m + row], kRounds * s);
          return 1;
        }
      }
    }
  }
  cublasDestroy(h);
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  return 0;
}

}  // namespace

int main() {
  uint32_t* buf[kBuffers];
  for (auto& b : buf) CHECK(cudaMalloc(&b, kBytes));
  if (tables(buf)) return 1;
  if (batched_gemm(buf)) return 1;
  for (auto& b : buf) CHECK(cudaFree(b));
  std::printf("ok\n");
  return 0;
}
