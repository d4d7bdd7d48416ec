// Qwen3NextForCausalLM (Qwen3-Next-80B-A3B): a hybrid of Gated DeltaNet linear attention and
// gated full attention (layer_types, or every full_attention_interval-th layer full), with
// Qwen3-MoE's routed experts plus a shared expert scaled by a sigmoid gate. Every RMSNorm is
// zero-centred (x * (1 + w)) except the gated norm inside linear attention; attention heads are
// q/k-normed, rotate only their first head_dim * partial_rotary_factor dimensions (0.25 unless
// configured) and multiply their output by sigmoid of a gate q_proj yields beside the query.
// Fields and defaults as transformers' Qwen3NextConfig.
#include <algorithm>
#include <string>

#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

// A count that may be 0 (num_experts 0: a dense model; shared_expert_intermediate_size 0: no
// shared expert), else as ConfigReader::integer.
int count_or(const ConfigReader& r, const std::string& key, int fallback) {
  if (r.has(key) && r.j[key].is_number_integer() && r.j[key].get<long long>() == 0) return 0;
  return r.integer_or(key, fallback);
}

void read_layer_types(const ConfigReader& r, ModelConfig& c) {
  c.linear_attention_layers.assign(std::size_t(c.num_layers), false);
  if (!r.has("layer_types")) {
    const int interval = r.integer_or("full_attention_interval", 4);
    for (int l = 0; l < c.num_layers; ++l)
      c.linear_attention_layers[std::size_t(l)] = (l + 1) % interval != 0;
    return;
  }
  c.linear_attention_layers = r.layer_types_marking(c.num_layers, "linear_attention");
}

void read(const ConfigReader& r, ModelConfig& c) {
  refuse_attention_bias(r);
  // Qwen3NextConfig's defaults where the common parser's differ.
  c.head_dim = r.integer_or("head_dim", 256);
  c.num_kv_heads = r.integer_or("num_key_value_heads", 2);
  if (c.num_heads % c.num_kv_heads != 0)
    r.fail("num_key_value_heads", "must divide num_attention_heads (" +
                                      std::to_string(c.num_heads) + "), got " +
                                      std::to_string(c.num_kv_heads));
  c.rotary_dim = read_rotary_dim(r, c.head_dim, 0.25);

  c.linear_num_key_heads = r.integer_or("linear_num_key_heads", 16);
  c.linear_num_value_heads = r.integer_or("linear_num_value_heads", 32);
  c.linear_key_head_dim = r.integer_or("linear_key_head_dim", 128);
  c.linear_value_head_dim = r.integer_or("linear_value_head_dim", 128);
  c.linear_conv_kernel_dim = r.integer_or("linear_conv_kernel_dim", 4);
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
    r.fail("linear_num_value_heads", "must be a multiple of linear_num_key_heads (" +
                                         std::to_string(c.linear_num_key_heads) + "), got " +
                                         std::to_string(c.linear_num_value_heads));
  read_layer_types(r, c);

  c.num_experts = count_or(r, "num_experts", 512);
  c.num_experts_per_tok = r.integer_or("num_experts_per_tok", 10);
  c.moe_intermediate_size = r.integer_or("moe_intermediate_size", 512);
  c.shared_expert_intermediate_size = count_or(r, "shared_expert_intermediate_size", 512);
  c.norm_topk_prob = r.boolean_or("norm_topk_prob", true);
  c.decoder_sparse_step = r.integer_or("decoder_sparse_step", 1);
  if (c.num_experts > 0 && c.num_experts_per_tok > c.num_experts)
    r.fail("num_experts_per_tok", "larger than num_experts");
  // vLLM reads it with a default of 1 for its mtp method; here the checkpoint's mtp.* tensors
  // decide whether the module loads (model_weights.h), and this count only checks them.
  c.num_nextn_predict_layers = count_or(r, "num_nextn_predict_layers", 0);
  if (r.has("mlp_only_layers")) {
    if (!r.j["mlp_only_layers"].is_array()) r.fail("mlp_only_layers", "expected a list of layers");
    for (const auto& l : r.j["mlp_only_layers"]) {
      if (!l.is_number_integer() || l.get<long long>() < 0 || l.get<long long>() >= c.num_layers)
        r.fail("mlp_only_layers", "expected layer numbers 0.." + std::to_string(c.num_layers - 1) +
                                      ", got " + l.dump());
      c.mlp_only_layers.push_back(l.get<int>());
    }
  }
}

LayerSpec layer(const ModelConfig& c, int l) {
  // Qwen3-MoE's choice of routed and dense layers (num_experts, decoder_sparse_step,
  // mlp_only_layers), with Qwen3's q/k norms.
  LayerSpec s = kQwen3Moe.layer(c, l);
  s.norm = NormKind::kRmsZeroCentred;
  if (s.ffn.kind == FfnKind::kMoe)
    s.ffn.moe.shared_expert_intermediate_size = c.shared_expert_intermediate_size;
  if (c.linear_attention_layers[std::size_t(l)]) {
    s.mixer = MixerKind::kGatedDeltaNet;
    s.attention = {};
    s.linear_attention = {c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim,
                          c.linear_value_head_dim, c.linear_conv_kernel_dim};
  } else {
    s.attention.output_gate = true;
  }
  return s;
}

}  // namespace

const Architecture kQwen3Next{Arch::Qwen3Next, "Qwen3NextForCausalLM", {}, read, layer};

}  // namespace nibble::model::architectures
