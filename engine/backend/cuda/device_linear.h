#pragma once
// A Linear layer on the GPU and the one place that runs it: NVFP4 weights repacked for the W4A16
// kernels (kernels/nvfp4_linear.h picks the tile by shape), dense weights as BF16 through cuBLAS.
// y[m, n] = x[m, k] W^T (+ bias) (+ residual); BF16 activations, FP32 accumulation.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/backend_options.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/linear.h"
#include "kernels/nvfp4_linear.h"

namespace nibble::backend::cuda {

struct DeviceLinear {
  std::int64_t n = 0, k = 0;
  // In the W4A16 layout: NVFP4, or MXFP4 (weight.format; gpt-oss's experts, which only the
  // grouped MoE kernels run: run() refuses them).
  bool nvfp4 = false;
  DeviceBuffer<std::uint8_t> tiles, scales;  // NVFP4 or MXFP4: the W4A16 layout
  kernels::W4A16DeviceWeight weight;         // views of tiles and scales
  DeviceBuffer<std::uint16_t> dense;         // dense: [n, k] BF16
  DeviceBuffer<float> bias;                  // [n] or empty
};

// Uploads `host` (and frees its host copy: weights of a large model should not live twice).
DeviceLinear upload_linear(model::Linear& host);

class LinearRunner {
 public:
  // max_split_rows: the largest m whose split-K partial sums the workspace holds; max_n: the
  // widest layer. Larger calls run unsplit. dense_elements: the most weights of one NVFP4 layer,
  // for which a BF16 scratch is allocated so that the planner may take the dequantise-then-cuBLAS
  // path at large m (kernels/nvfp4_linear.h); 0 or options.w4a16_dense off: no such path.
  // options.linear_overlap: programmatic dependent launch of the NVFP4 linears.
  LinearRunner(cudaStream_t stream, std::int64_t max_split_rows, std::int64_t max_n,
               std::size_t dense_elements, const CudaOptions& options);
  ~LinearRunner();
  LinearRunner(const LinearRunner&) = delete;
  LinearRunner& operator=(const LinearRunner&) = delete;

  // out = x W^T (+ bias) (+ residual, which must not alias out). x: [m, k], out: [m, n].
  void run(const DeviceLinear& w, const std::uint16_t* x, std::int64_t m,
           const std::uint16_t* residual, std::uint16_t* out);
  // FP32 output, no residual (MoE router scores: their top-k decides which experts run, so they
  // are not rounded to BF16 where the weights are dense, nor is a dense router's bias added in
  // BF16). scratch: m * n BF16 elements, used only for NVFP4 weights.
  void run_float(const DeviceLinear& w, const std::uint16_t* x, std::int64_t m, float* out,
                 DeviceBuffer<std::uint16_t>& scratch);

 private:
  void gemm(const DeviceLinear& w, const std::uint16_t* x, std::int64_t m, void* out,
            cudaDataType out_type, float beta);

  cudaStream_t stream_;
  cublasHandle_t cublas_ = nullptr;
  kernels::DeviceTraits traits_;
  DeviceBuffer<float> workspace_;
  DeviceBuffer<std::uint16_t> dense_weight_;  // the dense path's BF16 copy of one layer
  kernels::Nvfp4DenseOption dense_;
  bool dense_enabled_ = false;
  // cuBLAS's own workspace, given up front so that a captured decode graph never allocates.
  DeviceBuffer<std::uint8_t> cublas_workspace_;
  // Programmatic dependent launch of the NVFP4 linears (off: to measure what it gains, or to
  // rule it out).
  bool overlap_ = true;
};

}  // namespace nibble::backend::cuda
