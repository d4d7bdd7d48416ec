#pragma once
// CPU reference of a Gated DeltaNet layer's token mixing between its two projections (Qwen3-Next's
// `linear_attention` layers; transformers' Qwen3NextGatedDeltaNet.forward between in_proj_* and
// out_proj): the projections' outputs split by key-head group, the causal conv1d + SiLU over
// q, k and v, the gates, the gated delta rule, the gated RMSNorm with the z branch. The device
// kernels (gated_deltanet.h) compute the same function; the CPU backend runs this one.
#include <cstdint>
#include <span>

#include "kernels/linear_attention/gated_delta_ref.h"

namespace nibble::kernels {

struct GatedDeltaNetParams {
  std::span<const float> conv_weight;  // [conv_dim, conv_kernel]
  std::span<const float> A_log;        // [v_heads]
  std::span<const float> dt_bias;      // [v_heads]
  std::span<const float> norm_weight;  // [v_dim]
  float eps = 1e-6f;                   // rms_norm_eps
};

// One sequence's T tokens: qkvz [T, qkvz_width], ba [T, ba_width]; conv_state
// [conv_kernel - 1, conv_dim] and state [v_heads, k_dim, v_dim] carried in and out (zeros for a new
// sequence); out [T, value_dim], the input of out_proj. chunked: the delta rule's chunked form
// (prefill), else the recurrent one; the same results to rounding.
void gated_deltanet_mix_ref(const GatedDeltaNetShape& shape, std::int64_t tokens,
                            std::span<const float> qkvz, std::span<const float> ba,
                            const GatedDeltaNetParams& params, std::span<float> conv_state,
                            std::span<float> state, std::span<float> out, bool chunked);

}  // namespace nibble::kernels
