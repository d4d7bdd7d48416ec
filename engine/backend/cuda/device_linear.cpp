#include "engine/backend/cuda/device_linear.h"

#include <climits>
#include <vector>

#include "kernels/layer/layer_ops.h"
#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/w4a16_layout.h"

namespace nibble::backend::cuda {
namespace {
constexpr std::size_t kCublasWorkspaceBytes = std::size_t(32) << 20;  // cuBLAS's advice for Hopper
}  // namespace

DeviceLinear upload_linear(model::Linear& host) {
  DeviceLinear d;
  d.n = host.out_features;
  d.k = host.in_features;
  d.nvfp4 = host.quantized || host.is_mxfp4();
  if (d.nvfp4) {
    // MXFP4 (gpt-oss's experts, as shipped): the same layout with E8M0 exponents as its scale
    // bytes (w4a16_layout.h), which the grouped MoE kernels read; no conversion to NVFP4.
    nvfp4::W4A16Weight r =
        host.quantized ? nvfp4::repack_for_w4a16(host.fp4.packed, host.fp4.scales, host.fp4.rows,
                                                 host.fp4.cols, host.fp4.global_factor)
                       : nvfp4::repack_mxfp4_for_w4a16(host.mxfp4.packed, host.mxfp4.scales,
                                                       host.mxfp4.rows, host.mxfp4.cols);
    d.tiles = DeviceBuffer<std::uint8_t>::from(r.tiles);
    d.scales = DeviceBuffer<std::uint8_t>::from(r.scales);
    d.weight = {d.tiles.get(), d.scales.get(),  r.n,       r.k,     r.n_padded,
                r.k_padded,    r.global_factor, r.k_major, r.format};
    host.fp4 = {};
    host.mxfp4 = {};
  } else {
    std::vector<std::uint16_t> bf16(host.dense.size());
    for (std::size_t i = 0; i < bf16.size(); ++i) bf16[i] = nvfp4::float_to_bf16(host.dense[i]);
    d.dense = DeviceBuffer<std::uint16_t>::from(bf16);
    host.dense = {};
    host.dense.shrink_to_fit();
  }
  if (!host.bias.empty()) d.bias = DeviceBuffer<float>::from(host.bias);
  return d;
}

LinearRunner::LinearRunner(cudaStream_t stream, std::int64_t max_split_rows, std::int64_t max_n,
                           std::size_t dense_elements, const CudaOptions& options)
    : stream_(stream), overlap_(options.linear_overlap) {
  check(kernels::query_device_traits(&traits_, options.linear), "reading the device's properties");
  check(cublasCreate(&cublas_), "cublasCreate");
  check(cublasSetStream(cublas_, stream), "cublasSetStream");
  cublas_workspace_.ensure(kCublasWorkspaceBytes);
  check(cublasSetWorkspace(cublas_, cublas_workspace_.get(), kCublasWorkspaceBytes),
        "cublasSetWorkspace");
  if (dense_elements > 0 && options.w4a16_dense) {
    dense_weight_.ensure(dense_elements);
    dense_.scratch = {cublas_, dense_weight_.get(), dense_elements};
    dense_enabled_ = true;
  }
  const std::size_t bytes = kernels::nvfp4_linear_workspace_bytes(max_split_rows, max_n);
  if (bytes == 0) return;  // no NVFP4 layer: nothing is split
  workspace_.ensure(bytes / sizeof(float));
  // The split-K workspace must be zero on entry; every call leaves it zero.
  check(cudaMemset(workspace_.get(), 0, bytes), "clearing the split-K workspace");
}

LinearRunner::~LinearRunner() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

void LinearRunner::gemm(const DeviceLinear& w, const std::uint16_t* x, std::int64_t m, void* out,
                        cudaDataType out_type, float beta) {
  if (w.n > INT_MAX || w.k > INT_MAX || m > INT_MAX)
    throw BackendError("cuda backend: a linear layer too large for one cuBLAS call");
  // Row-major y[m, n] = x[m, k] W[n, k]^T is column-major y^T[n, m] = W^T[n, k] x^T[k, m].
  const float alpha = 1.0f;
  check(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(w.n), int(m), int(w.k), &alpha,
                     w.dense.get(), CUDA_R_16BF, int(w.k), x, CUDA_R_16BF, int(w.k), &beta, out,
                     out_type, int(w.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

void LinearRunner::run(const DeviceLinear& w, const std::uint16_t* x, std::int64_t m,
                       const std::uint16_t* residual, std::uint16_t* out) {
  if (m == 0) return;
  if (w.nvfp4 && w.weight.format == nvfp4::W4A16Format::kMxfp4)
    throw BackendError(
        "cuda backend: MXFP4 weights run only as a MoE layer's grouped experts, not as a linear "
        "of their own");
  if (w.nvfp4) {
    // With overlap: the norm, attention and SwiGLU kernels in front of the linears let them
    // start early (allow_next_grid), so a decode step's weights stream while those run.
    check(kernels::nvfp4_linear(x, m, w.weight, residual, out, workspace_.get(),
                                workspace_.size() * sizeof(float), traits_, stream_, overlap_,
                                dense_enabled_ ? &dense_ : nullptr),
          "nvfp4_linear");
  } else {
    if (residual != nullptr)
      check(cudaMemcpyAsync(out, residual, std::size_t(m * w.n) * 2, cudaMemcpyDeviceToDevice,
                            stream_),
            "copying the residual");
    gemm(w, x, m, out, CUDA_R_16BF, residual != nullptr ? 1.0f : 0.0f);
  }
  if (!w.bias.empty())
    check(kernels::add_bias(out, w.bias.get(), int(m), int(w.n), stream_), "add_bias");
}

void LinearRunner::run_float(const DeviceLinear& w, const std::uint16_t* x, std::int64_t m,
                             float* out, DeviceBuffer<std::uint16_t>& scratch) {
  if (m == 0) return;
  if (w.nvfp4) {
    scratch.ensure(std::size_t(m * w.n));
    run(w, x, m, nullptr, scratch.get());
    check(kernels::bf16_to_float(scratch.get(), m * w.n, out, stream_), "bf16_to_float");
    return;
  }
  gemm(w, x, m, out, CUDA_R_32F, 0.0f);
  // A dense router's bias (gpt-oss) in FP32 too, as the CPU backend adds it.
  if (!w.bias.empty())
    check(kernels::add_bias_float(out, w.bias.get(), int(m), int(w.n), stream_), "add_bias_float");
}

}  // namespace nibble::backend::cuda
