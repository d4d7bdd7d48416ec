#include "kernels/nvfp4/w4a16_dense.h"

#include <algorithm>
#include <climits>

#include "kernels/nvfp4/w4a16_dequant.h"

namespace nibble::kernels {
namespace {

constexpr std::int64_t kGroupRows = 128;

cudaError_t from_cublas(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return cudaSuccess;
    case CUBLAS_STATUS_ALLOC_FAILED:
      return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_INVALID_VALUE:
      return cudaErrorInvalidValue;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return cudaErrorNotSupported;
    default:
      return cudaErrorUnknown;
  }
}

}  // namespace

std::int64_t w4a16_dense_rows_per_round(const W4A16DenseScratch& scratch, std::int64_t n,
                                        std::int64_t k, std::int64_t max_rows) {
  if (scratch.weight == nullptr || k <= 0 || n <= 0) return 0;
  std::int64_t rows = std::int64_t(scratch.weight_elements) / k / kGroupRows * kGroupRows;
  if (max_rows > 0) rows = std::min(rows, std::max(kGroupRows, max_rows / kGroupRows * kGroupRows));
  const std::int64_t layer = (n + kGroupRows - 1) / kGroupRows * kGroupRows;
  return std::min(rows, layer);
}

cudaError_t w4a16_dense_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                               const std::uint16_t* residual, std::uint16_t* out,
                               const W4A16DenseScratch& scratch, cudaStream_t stream,
                               std::int64_t max_rows_per_round) {
  if (m < 0 || w.n <= 0 || w.k <= 0 || w.k % 16 != 0 || m > INT_MAX || w.n > INT_MAX ||
      w.k > INT_MAX || scratch.cublas == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (m == 0) return cudaSuccess;
  const std::int64_t rows_per_round =
      w4a16_dense_rows_per_round(scratch, w.n, w.k, max_rows_per_round);
  if (rows_per_round == 0) return cudaErrorInvalidValue;
  cudaError_t err = from_cublas(cublasSetStream(scratch.cublas, stream));
  if (err != cudaSuccess) return err;
  // The residual goes into out first and the GEMM adds into it (beta = 1): FP32 sum, one
  // rounding to BF16, as the W4A16 kernels' epilogue.
  if (residual != nullptr && residual != out) {
    err = cudaMemcpyAsync(out, residual, std::size_t(m * w.n) * sizeof(std::uint16_t),
                          cudaMemcpyDeviceToDevice, stream);
    if (err != cudaSuccess) return err;
  }
  const float alpha = w.global_factor, beta = residual != nullptr ? 1.0f : 0.0f;
  for (std::int64_t row0 = 0; row0 < w.n; row0 += rows_per_round) {
    const std::int64_t rows = std::min(rows_per_round, w.n - row0);
    err = w4a16_dequantize(w, row0, rows, scratch.weight, stream);
    if (err != cudaSuccess) return err;
    // Row-major out[m, n] = x[m, k] W[n, k]^T is column-major out^T[n, m] = W^T x^T; this round
    // fills rows [row0, row0 + rows) of out^T (columns of out), leading dimension n.
    err = from_cublas(cublasGemmEx(scratch.cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(m),
                                   int(w.k), &alpha, scratch.weight, CUDA_R_16BF, int(w.k), x,
                                   CUDA_R_16BF, int(w.k), &beta, out + row0, CUDA_R_16BF, int(w.n),
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (err != cudaSuccess) return err;
  }
  return cudaGetLastError();
}

}  // namespace nibble::kernels
