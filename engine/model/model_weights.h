#pragma once
// A whole model in memory: config plus every weight, named by the Hugging Face layout
// (model.embed_tokens, model.layers.N.{self_attn,mlp}..., model.norm, lm_head).
// Shapes below: H = hidden_size, D = head_dim, Hq/Hkv = query/kv heads, I = intermediate size.
#include <filesystem>
#include <vector>

#include "engine/model/linear.h"
#include "engine/model/model_config.h"
#include "engine/model/quant_config.h"

namespace nibble::model {

struct ExpertWeights {
  Linear gate, up;  // [moe_I, H] (ExpertLayout::kPerExpert)
  Linear down;      // [H, moe_I]
  Linear gate_up;   // [2 * moe_I, H], rows interleaved gate, up (ExpertLayout::kFusedInterleaved)
};

struct LayerWeights {
  std::vector<float> input_norm;           // [H]
  std::vector<float> post_attention_norm;  // [H]
  Linear q, k, v;                          // [Hq*D, H], [Hkv*D, H], [Hkv*D, H]
  Linear o;                                // [H, Hq*D]
  std::vector<float> q_norm, k_norm;       // [D] when the layer has a q/k norm
  std::vector<float> sinks;                // [Hq] when the layer has attention sinks
  bool moe = false;
  Linear gate, up, down;  // dense MLP: [I, H], [I, H], [H, I]
  Linear router;          // MoE: [num_experts, H] (+ bias [num_experts] when router_bias)
  std::vector<ExpertWeights> experts;
};

struct ModelWeights {
  ModelConfig config;
  QuantConfig quant;
  std::vector<float> embed;  // [vocab, H]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [H]
  Linear lm_head;                 // [vocab, H]; a copy of embed when tied
};

// Loads config.json, the quantization config and every tensor; throws ModelError.
ModelWeights load_model(const std::filesystem::path& dir);

}  // namespace nibble::model
