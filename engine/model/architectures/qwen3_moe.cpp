// Qwen3MoeForCausalLM: Qwen3's attention with sparse mixture-of-experts MLPs. Every
// decoder_sparse_step-th layer routes each token to num_experts_per_tok of num_experts SwiGLU
// experts, except the layers listed in mlp_only_layers, which keep a dense MLP. No shared expert.
#include <algorithm>

#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

// transformers 5 saves Qwen3MoeConfig.num_experts as num_local_experts (its attribute_map).
constexpr KeyAlias kAliases[] = {{"num_experts", "num_local_experts"}};

void read(const ConfigReader& r, ModelConfig& c) {
  refuse_attention_bias(r);
  c.num_experts = r.integer("num_experts");
  c.num_experts_per_tok = r.integer("num_experts_per_tok");
  c.moe_intermediate_size = r.integer("moe_intermediate_size");
  c.norm_topk_prob = r.boolean_or("norm_topk_prob", false);
  c.decoder_sparse_step = r.integer_or("decoder_sparse_step", 1);
  if (r.has("mlp_only_layers")) {
    if (!r.j["mlp_only_layers"].is_array()) r.fail("mlp_only_layers", "expected a list of layers");
    for (const auto& l : r.j["mlp_only_layers"]) {
      if (!l.is_number_integer()) r.fail("mlp_only_layers", "expected integers");
      c.mlp_only_layers.push_back(l.get<int>());
    }
  }
  if (c.num_experts_per_tok > c.num_experts)
    r.fail("num_experts_per_tok", "larger than num_experts");
  if (r.has("shared_expert_intermediate_size") &&
      r.number_or("shared_expert_intermediate_size", 0) != 0)
    r.fail("shared_expert_intermediate_size", "shared experts are not implemented");
}

bool routed(const ModelConfig& c, int layer) {
  if (c.num_experts == 0) return false;
  if (std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), layer) !=
      c.mlp_only_layers.end())
    return false;
  return (layer + 1) % std::max(c.decoder_sparse_step, 1) == 0;
}

LayerSpec layer(const ModelConfig& c, int l) {
  LayerSpec s = kQwen3.layer(c, l);
  if (!routed(c, l)) return s;
  s.ffn.kind = FfnKind::kMoe;
  s.ffn.moe.experts = c.num_experts;
  s.ffn.moe.top_k = c.num_experts_per_tok;
  s.ffn.moe.intermediate_size = c.moe_intermediate_size;
  s.ffn.moe.norm_topk_prob = c.norm_topk_prob;
  return s;
}

}  // namespace

const Architecture kQwen3Moe{Arch::Qwen3Moe, "Qwen3MoeForCausalLM", kAliases, read, layer};

}  // namespace nibble::model::architectures
