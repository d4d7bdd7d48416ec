#pragma once
// The shapes of Gated DeltaNet's arrays (Qwen3-Next's linear-attention layers), shared by the CPU
// references (gated_delta_ref.h, gated_deltanet_ref.h) and the device kernels (gated_deltanet.h).
#include <cstdint>

namespace nibble::kernels {

struct GatedDeltaShape {
  int k_heads = 0, v_heads = 0;  // v_heads % k_heads == 0
  int k_dim = 0, v_dim = 0;
  std::int64_t state_floats() const { return std::int64_t(v_heads) * k_dim * v_dim; }
};

struct GatedDeltaNetShape {
  GatedDeltaShape heads;  // linear_num_{key,value}_heads, linear_{key,value}_head_dim
  int conv_kernel = 4;    // linear_conv_kernel_dim
  int group() const { return heads.v_heads / heads.k_heads; }
  int key_dim() const { return heads.k_heads * heads.k_dim; }
  int value_dim() const { return heads.v_heads * heads.v_dim; }
  // The conv's channels: q (key_dim), k (key_dim), v (value_dim), in that order.
  int conv_dim() const { return 2 * key_dim() + value_dim(); }
  // in_proj_qkvz's output per token: per key head kh, [q (k_dim) | k (k_dim) | v (group v_dim) |
  // z (group v_dim)]; in_proj_ba's: per key head, [b (group) | a (group)].
  int qkvz_width() const { return heads.k_heads * (2 * heads.k_dim + 2 * group() * heads.v_dim); }
  int ba_width() const { return 2 * heads.v_heads; }
  std::int64_t conv_state_floats() const { return std::int64_t(conv_kernel - 1) * conv_dim(); }
};

}  // namespace nibble::kernels
