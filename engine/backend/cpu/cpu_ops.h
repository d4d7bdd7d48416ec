#pragma once
// The FP32 building blocks of the CPU reference forward pass. Shapes are row-major;
// T = tokens in the batch. NVFP4 weights are dequantized one row at a time as they are used.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/linear.h"
#include "engine/model/model_config.h"
#include "engine/runtime/thread_pool.h"

namespace nibble::backend::cpu {

using runtime::ThreadPool;  // engine/runtime/thread_pool.h

// y[T, out] = x[T, in] W^T (+ bias); rows of W are spread over the pool.
void linear_forward(const model::Linear& w, std::span<const float> x, std::int64_t tokens,
                    std::span<float> y, ThreadPool& pool);

// x[rows, dim] -> x / sqrt(mean(x^2) + eps) * weight, in place.
// weight_offset 1: the zero-centred norm (Qwen3-Next), x * (1 + w) with w stored around 0.
void rms_norm(std::span<float> x, std::int64_t dim, std::span<const float> weight, float eps,
              float weight_offset = 0.0f);

// Rotary frequencies for head_dim (dim / 2 values), with Llama-3 or YaRN scaling when
// configured (YaRN's attention factor is RopeConfig::attention_factor, apply_rope's scale).
std::vector<double> rope_inverse_frequencies(const model::RopeConfig& rope, int head_dim);

// Rotates one head vector [head_dim] at `position` (rotate-half pairing: i with i + dim/2) and
// scales it by `scale` (transformers multiplies cos and sin by the rope's attention factor).
void apply_rope(std::span<float> head, std::span<const double> inv_freq, int position,
                double scale = 1.0);

float silu(float x);
float sigmoid(float x);  // 1 / (1 + exp(-x))

// In-place softmax over x.
void softmax(std::span<float> x);

// In-place softmax over x with one more logit, `sink`, in the denominator only (attention
// sinks): x_i = exp(x_i) / (sum_j exp(x_j) + exp(sink)).
void softmax_with_sink(std::span<float> x, float sink);

// gpt-oss's expert activation: g = min(gate, limit), u = clamp(up, -limit, limit),
// (u + 1) * g * sigmoid(alpha * g).
float clamped_swiglu_value(float gate, float up, float alpha, float limit);

}  // namespace nibble::backend::cpu
