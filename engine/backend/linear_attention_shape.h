#pragma once
// A Gated DeltaNet layer's shapes as the kernels take them (kernels/linear_attention/
// gated_deltanet_shape.h), and one sequence's recurrent state in it, for every backend's state
// slots.
#include <cstddef>
#include <cstdint>

#include "engine/model/model_description.h"
#include "kernels/linear_attention/gated_deltanet_shape.h"

namespace nibble::backend {

inline kernels::GatedDeltaNetShape deltanet_shape(const model::LinearAttentionSpec& s) {
  return {{s.key_heads, s.value_heads, s.key_head_dim, s.value_head_dim}, s.conv_kernel};
}

// Floats of one sequence's state in one linear-attention layer: its conv window, its delta-rule
// state.
inline std::int64_t layer_state_floats(const model::LinearAttentionSpec& s) {
  const kernels::GatedDeltaNetShape shape = deltanet_shape(s);
  return shape.conv_state_floats() + shape.heads.state_floats();
}

// Floats of one sequence's FP32 states over every linear-attention layer of `d` (0: none).
inline std::size_t state_slot_floats(const model::ModelDescription& d) {
  std::size_t floats = 0;
  for (const model::LayerSpec& l : d.layers)
    if (l.mixer == model::MixerKind::kGatedDeltaNet)
      floats += std::size_t(layer_state_floats(l.linear_attention));
  return floats;
}

}  // namespace nibble::backend
