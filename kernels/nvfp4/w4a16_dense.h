#pragma once
// The dequantise-then-cuBLAS path of an NVFP4 linear layer, a planner candidate for large M
// (nvfp4_linear.h): the weight is written as dense BF16 into a scratch buffer
// (w4a16_dequant.h, bandwidth-bound), then cuBLAS runs a BF16 GEMM on it with FP32 accumulation.
// Past a few hundred rows of x the GEMM's tensor-core rate (cuBLAS uses wgmma on Hopper) pays
// for the extra pass over the weight; the planner takes it only where nibble-kernel-bench
// measured it faster (kernels/nvfp4/PERF_NOTES.md v21).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {

// Scratch of the path. The caller allocates `weight` once (sized by the largest n * k it will
// run, or smaller: a layer then runs in slices of whole 128-row weight groups) and owns the
// cuBLAS handle (with its workspace set, so that a captured graph never allocates). Calls that
// share a scratch must not run concurrently.
struct W4A16DenseScratch {
  cublasHandle_t cublas = nullptr;
  std::uint16_t* weight = nullptr;  // BF16, 16-byte aligned
  std::size_t weight_elements = 0;
};

// Weight rows one dequantise + GEMM round takes with this scratch: whole 128-row groups, at most
// `max_rows` (0: no limit) and at most the layer; 0 when not even one group fits.
std::int64_t w4a16_dense_rows_per_round(const W4A16DenseScratch& scratch, std::int64_t n,
                                        std::int64_t k, std::int64_t max_rows = 0);

// out[m, n] = x[m, k] . W^T (+ residual), as w4a16_linear (x, residual, out: BF16 bits, row-major;
// residual may equal out). max_rows_per_round > 0 caps the slice of weight rows per round (a
// smaller slice stays in L2 between its dequantisation and its GEMM; nibble-kernel-bench sweeps
// it). Sets the handle's stream to `stream`. cudaErrorInvalidValue for shapes past cuBLAS's int
// range or a scratch smaller than one weight group; cuBLAS failures map to a CUDA error
// (cudaErrorMemoryAllocation, cudaErrorNotSupported, cudaErrorUnknown).
cudaError_t w4a16_dense_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                               const std::uint16_t* residual, std::uint16_t* out,
                               const W4A16DenseScratch& scratch, cudaStream_t stream,
                               std::int64_t max_rows_per_round = 0);

}  // namespace nibble::kernels
