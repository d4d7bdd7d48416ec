#include "engine/backend/cuda/kernel_shapes.h"

#include <algorithm>
#include <string>

#include "engine/backend/backend.h"
#include "engine/model/model_description.h"
#include "kernels/moe/moe_layout.h"

namespace nibble::backend::cuda {

void refuse_shapes_beyond_kernels(const model::ModelConfig& c) {
  if (c.head_dim % 8 != 0 || c.head_dim > 256 || c.num_kv_heads < 1 ||
      c.num_heads % c.num_kv_heads != 0)
    throw BackendError(
        "cuda backend: runs head_dim 8..256 in steps of 8 with num_heads a multiple of "
        "num_kv_heads; this model has head_dim " +
        std::to_string(c.head_dim) + ", " + std::to_string(c.num_heads) + " query and " +
        std::to_string(c.num_kv_heads) + " KV heads");
  const model::ModelDescription d = model::describe_model(c);
  for (const model::LayerSpec& l : d.layers) {
    if (l.ffn.kind != model::FfnKind::kMoe ||
        l.ffn.moe.activation != model::ExpertActivation::kClampedSwiGlu)
      continue;
    // The fused gate_up kernel's blocks take 16 gate and 16 up rows (32 interleaved).
    const model::MoeSpec& m = l.ffn.moe;
    if (m.intermediate_size % 16 != 0 || m.experts > kernels::kMoeMaxExperts ||
        m.top_k > kernels::kMoeMaxTopK)
      throw BackendError(
          "cuda backend: runs clamped-SwiGLU experts (gpt-oss) of an intermediate_size that is a "
          "multiple of 16, up to " +
          std::to_string(kernels::kMoeMaxExperts) + " experts and top " +
          std::to_string(kernels::kMoeMaxTopK) + "; this model has intermediate_size " +
          std::to_string(m.intermediate_size) + ", " + std::to_string(m.experts) +
          " experts, top " + std::to_string(m.top_k));
    break;  // every MoE layer has the config's one shape
  }
  for (const model::LayerSpec& l : d.layers) {
    if (l.mixer != model::MixerKind::kGatedDeltaNet) continue;
    const model::LinearAttentionSpec& s = l.linear_attention;
    const int group_width = s.value_heads / std::max(s.key_heads, 1) * s.value_head_dim;
    if ((s.key_head_dim != 32 && s.key_head_dim != 64 && s.key_head_dim != 128) ||
        s.value_head_dim % 32 != 0 || group_width < 64 || group_width > 256 || s.conv_kernel < 2 ||
        s.conv_kernel > 8)
      throw BackendError(
          "cuda backend: runs Gated DeltaNet layers of linear_key_head_dim 32, 64 or 128, "
          "linear_value_head_dim a multiple of 32 with 64..256 value columns per key head, and "
          "linear_conv_kernel_dim 2..8; this model has key/value head dims " +
          std::to_string(s.key_head_dim) + "/" + std::to_string(s.value_head_dim) + ", " +
          std::to_string(group_width) + " value columns per key head, conv kernel " +
          std::to_string(s.conv_kernel));
    break;  // every linear-attention layer has the config's one shape
  }
  if (c.rope_dim() != c.head_dim && (c.rope_dim() % 2 != 0 || c.head_dim > 512))
    throw BackendError(
        "cuda backend: runs partial RoPE on an even rotary dimension of heads up to "
        "512 wide; this model rotates " +
        std::to_string(c.rope_dim()) + " of " + std::to_string(c.head_dim));
}

}  // namespace nibble::backend::cuda
