#pragma once
// The elementwise and per-row kernels of the CUDA forward pass (everything but the linear
// layers, which go through kernels/nvfp4_linear.h or cuBLAS, and attention, paged_attention.h).
// Activations are BF16 (uint16_t bits), row-major; norms and rotary math run in FP32 (the
// rotation angle in FP64, as the CPU reference does). Each launcher enqueues on `stream` and
// returns the launch error; the CPU reference of each is named beside it.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kernel_options.h"

namespace nibble::kernels {

// out[t, :] = table[tokens[t], :] for t < rows (table [vocab, dim]).
cudaError_t embed_rows(const std::uint16_t* table, const std::int32_t* tokens, int rows, int dim,
                       std::uint16_t* out, cudaStream_t stream);

// out[r, :] = in[r, :] / sqrt(mean(in[r, :]^2) + eps) * weight  (cpu::rms_norm). in may be out.
cudaError_t rms_norm(const std::uint16_t* in, const float* weight, int rows, int dim, float eps,
                     std::uint16_t* out, cudaStream_t stream, const LayerOptions& options = {});
// The same over gathered rows: out[r, :] = rms_norm(in[index[r], :]) for r < rows (the last-token
// pick before the lm_head and its norm in one launch). in must not be out.
cudaError_t rms_norm_rows(const std::uint16_t* in, const std::int32_t* index, const float* weight,
                          int rows, int dim, float eps, std::uint16_t* out, cudaStream_t stream,
                          const LayerOptions& options = {});

// The rows' source rows: out[i, :] = in[index[i], :] (MoE token gather, last-token pick).
cudaError_t gather_rows(const std::uint16_t* in, const std::int32_t* index, int rows, int dim,
                        std::uint16_t* out, cudaStream_t stream);

// Per token t, head h of q [T, Hq, D] and k [T, Hkv, D]: RMSNorm over the head when q_norm /
// k_norm are given (Qwen3), then the rotary embedding at positions[t] (cpu::apply_rope, rotate-
// half pairing) on the head's first rotary_dim dimensions, the rest passed through (partial
// RoPE, Qwen3-Next); q goes to q_out [T, Hq, D], k and v are stored at cache row slots[t] of
// k_cache and v_cache ([rows, Hkv, D]). inv_freq: rotary_dim/2 doubles
// (cpu::rope_inverse_frequencies). Token t's q, k, v start at t * q_stride, t * kv_stride:
// separate buffers, or views into one fused qkv projection's output; q's heads are q_head_stride
// apart (2 D where q_proj yields a gate after each head's query). q_out may be q_in only where
// q_head_stride is D.
struct RopeStoreArgs {
  const std::uint16_t* q_in = nullptr;
  std::uint16_t* q_out = nullptr;
  const std::uint16_t* k = nullptr;
  const std::uint16_t* v = nullptr;
  std::int64_t q_stride = 0, kv_stride = 0;
  int q_head_stride = 0;          // 0: head_dim
  int rotary_dim = 0;             // even, <= head_dim (partial RoPE: head_dim <= 512); 0: head_dim
  const float* q_norm = nullptr;  // [D] or null
  const float* k_norm = nullptr;  // [D] or null
  float eps = 1e-6f;
  const double* inv_freq = nullptr;
  // q and k times this after the rotation (YaRN's attention factor, RopeConfig::attention_factor;
  // cpu::apply_rope's scale): the rotation's cosine and sine are scaled.
  float attention_factor = 1.0f;
  const std::int32_t* positions = nullptr;  // [T]
  const std::int64_t* slots = nullptr;      // [T]
  std::uint16_t* k_cache = nullptr;
  std::uint16_t* v_cache = nullptr;
  // The FP8 cache instead (kernels/attention/kv_fp8_ref.h) when k_cache8 is set: E4M3 codes
  // [rows, Hkv, D] and BF16 scales [rows, Hkv] of the values the BF16 cache would hold.
  std::uint8_t* k_cache8 = nullptr;
  std::uint8_t* v_cache8 = nullptr;
  std::uint16_t* k_scale = nullptr;
  std::uint16_t* v_scale = nullptr;
  int tokens = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
};
cudaError_t rope_and_store_kv(const RopeStoreArgs& args, cudaStream_t stream,
                              const LayerOptions& options = {});

// The SwiGLU middle: act[i] = silu(gate[i]) * up[i] over n elements, or, from one fused gate_up
// projection [rows, 2 * width] (gate columns first): act[r, i] = silu(gu[r, i]) * gu[r, width + i].
cudaError_t silu_mul(const std::uint16_t* gate, const std::uint16_t* up, std::int64_t n,
                     std::uint16_t* act, cudaStream_t stream, const LayerOptions& options = {});
cudaError_t silu_mul_halves(const std::uint16_t* gate_up, std::int64_t rows, std::int64_t width,
                            std::uint16_t* act, cudaStream_t stream,
                            const LayerOptions& options = {});

// y[r, c] += bias[c] (Qwen2's q/k/v biases).
cudaError_t add_bias(std::uint16_t* y, const float* bias, int rows, int cols, cudaStream_t stream);
// The same over FP32 rows (a router's scores with its bias, gpt-oss): y [rows, cols].
cudaError_t add_bias_float(float* y, const float* bias, int rows, int cols, cudaStream_t stream);

// gpt-oss's expert middle from one gate_up projection [rows, 2 * width] whose columns interleave
// gate and up (2i gate i, 2i + 1 up i; its biases already added): g = min(gate, limit),
// u = clamp(up, -limit, limit), act[r, i] = (u + 1) * g * sigmoid(alpha * g), [rows, width]. The
// CPU reference: cpu::clamped_swiglu_value (engine/backend/cpu/cpu_ops.h).
cudaError_t clamped_swiglu_interleaved(const std::uint16_t* gate_up, std::int64_t rows,
                                       std::int64_t width, float alpha, float limit,
                                       std::uint16_t* act, cudaStream_t stream,
                                       const LayerOptions& options = {});

// Mixture of experts, after every expert ran over its gathered rows:
// out[t, :] = residual[t, :] + sum_j weight[t, j] * expert_out[source[t, j], :], j < per_token.
cudaError_t combine_experts(const std::uint16_t* residual, const std::uint16_t* expert_out,
                            const std::int32_t* source, const float* weight, int tokens,
                            int per_token, int dim, std::uint16_t* out, cudaStream_t stream);

// Gated attention's output gate (Qwen3-Next): y[t, h, d] *= sigmoid(gate[t * gate_stride +
// h * gate_head_stride + d]) for t < rows, h < heads, d < dim; y [rows, heads, dim]. The CPU
// reference: the output gate of cpu::CpuForward::attention (cpu::sigmoid).
cudaError_t sigmoid_gate_heads(std::uint16_t* y, const std::uint16_t* gate, int rows, int heads,
                               int dim, std::int64_t gate_stride, std::int64_t gate_head_stride,
                               cudaStream_t stream);

// A shared expert's gated add (Qwen3-Next): x[t, :] += sigmoid(scale[t]) * y[t, :] for t < rows;
// x, y [rows, dim] BF16, scale [rows] FP32 (shared_expert_gate's output). The CPU reference: the
// shared expert of cpu::CpuForward::moe.
cudaError_t add_sigmoid_scaled_rows(std::uint16_t* x, const std::uint16_t* y, const float* scale,
                                    int rows, int dim, cudaStream_t stream);

// BF16 -> FP32 (logits of an NVFP4 lm_head).
cudaError_t bf16_to_float(const std::uint16_t* in, std::int64_t n, float* out, cudaStream_t stream);

}  // namespace nibble::kernels
