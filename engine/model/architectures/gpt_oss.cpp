// GptOssForCausalLM (gpt-oss-20b, gpt-oss-120b): every layer attends with biases on q, k, v and
// o and a learned sink logit per head, alternating a sliding window (layer_types
// "sliding_attention") with full attention, under YaRN RoPE; and every layer is a mixture of
// experts: a biased router keeps the top k logits and softmaxes over them, and each expert runs
// its fused, interleaved gate/up projection through the clamped SwiGLU (alpha 1.702, fixed in
// transformers) into its down projection, both with biases. The checkpoints ship the experts
// in MXFP4 (quant_config.h) and everything else in BF16.
#include <string>

#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

// GptOssConfig's attribute_map: num_experts is num_local_experts; the public config.json also
// carries experts_per_token beside num_experts_per_tok.
constexpr KeyAlias kAliases[] = {{"num_experts", "num_local_experts"},
                                 {"num_experts_per_tok", "experts_per_token"}};

constexpr float kSwigluAlpha = 1.702f;  // GptOssExperts.alpha: not a config field

void read_layer_types(const ConfigReader& r, ModelConfig& c) {
  const int window = r.integer("sliding_window");
  c.layer_windows.assign(std::size_t(c.num_layers), 0);
  if (!r.has("layer_types")) {
    // GptOssConfig's default: even layers slide, odd layers see everything.
    for (int l = 0; l < c.num_layers; l += 2) c.layer_windows[std::size_t(l)] = window;
    return;
  }
  const std::vector<bool> sliding = r.layer_types_marking(c.num_layers, "sliding_attention");
  for (int l = 0; l < c.num_layers; ++l)
    if (sliding[std::size_t(l)]) c.layer_windows[std::size_t(l)] = window;
}

void read(const ConfigReader& r, ModelConfig& c) {
  c.attention_bias = r.boolean_or("attention_bias", true);
  c.num_experts = r.integer("num_experts");
  c.num_experts_per_tok = r.integer("num_experts_per_tok");
  c.moe_intermediate_size = c.intermediate_size;  // GptOssExperts: each expert's width
  c.swiglu_limit = r.number_or("swiglu_limit", 7.0);
  if (c.num_experts_per_tok > c.num_experts)
    r.fail("num_experts_per_tok", "larger than num_experts");
  if (!(c.swiglu_limit > 0)) r.fail("swiglu_limit", "expected a positive number");
  read_layer_types(r, c);
}

LayerSpec layer(const ModelConfig& c, int l) {
  LayerSpec s;
  s.attention.qkv_bias = c.attention_bias;
  s.attention.o_bias = c.attention_bias;
  s.attention.sinks = true;
  s.attention.sliding_window = c.layer_windows.empty() ? 0 : c.layer_windows[std::size_t(l)];
  s.ffn.kind = FfnKind::kMoe;
  MoeSpec& m = s.ffn.moe;
  m.experts = c.num_experts;
  m.top_k = c.num_experts_per_tok;
  m.intermediate_size = c.moe_intermediate_size;
  m.routing = MoeRouting::kTopKSoftmax;
  m.router_bias = true;
  m.expert_bias = true;
  m.activation = ExpertActivation::kClampedSwiGlu;
  m.swiglu_alpha = kSwigluAlpha;
  m.swiglu_limit = float(c.swiglu_limit);
  m.layout = ExpertLayout::kFusedInterleaved;
  return s;
}

}  // namespace

const Architecture kGptOss{Arch::GptOss, "GptOssForCausalLM", kAliases, read, layer};

}  // namespace nibble::model::architectures
