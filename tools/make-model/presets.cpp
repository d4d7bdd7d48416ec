#include "tools/make-model/presets.h"

#include <algorithm>
#include <string>

namespace nibble::tools {
namespace {

using nlohmann::ordered_json;

struct Shape {
  int hidden, intermediate, layers, heads, kv_heads, head_dim;
  bool tied;
  int experts = 0, experts_per_tok = 0, moe_intermediate = 0;
};

ordered_json llama_config(const Shape& s, int max_positions) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", 128256},
          {"hidden_size", s.hidden},
          {"intermediate_size", s.intermediate},
          {"num_hidden_layers", s.layers},
          {"num_attention_heads", s.heads},
          {"num_key_value_heads", s.kv_heads},
          {"head_dim", s.head_dim},
          {"hidden_act", "silu"},
          {"max_position_embeddings", max_positions},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", 8.0},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 8192}}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"mlp_bias", false},
          {"initializer_range", 0.02},
          {"pretraining_tp", 1},
          {"use_cache", true},
          {"tie_word_embeddings", s.tied},
          {"bos_token_id", 128000},
          {"eos_token_id", 128001},
          {"torch_dtype", "bfloat16"}};
}

ordered_json qwen3_config(const Shape& s, bool moe) {
  ordered_json c = {{"architectures", {moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"}},
                    {"model_type", moe ? "qwen3_moe" : "qwen3"},
                    {"vocab_size", 151936},
                    {"hidden_size", s.hidden},
                    {"intermediate_size", s.intermediate},
                    {"num_hidden_layers", s.layers},
                    {"num_attention_heads", s.heads},
                    {"num_key_value_heads", s.kv_heads},
                    {"head_dim", s.head_dim},
                    {"hidden_act", "silu"},
                    {"max_position_embeddings", 40960},
                    {"rms_norm_eps", 1e-6},
                    {"rope_theta", 1000000.0},
                    {"rope_scaling", nullptr},
                    {"attention_bias", false},
                    {"attention_dropout", 0.0},
                    {"use_sliding_window", false},
                    {"sliding_window", nullptr},
                    {"max_window_layers", s.layers},
                    {"initializer_range", 0.02},
                    {"use_cache", true},
                    {"tie_word_embeddings", s.tied},
                    {"bos_token_id", 151643},
                    {"eos_token_id", 151645},
                    {"torch_dtype", "bfloat16"}};
  if (moe) {
    c["num_experts"] = s.experts;
    c["num_experts_per_tok"] = s.experts_per_tok;
    c["moe_intermediate_size"] = s.moe_intermediate;
    c["norm_topk_prob"] = true;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = ordered_json::array();
    c["output_router_logits"] = false;
    c["router_aux_loss_coef"] = 0.001;
  }
  return c;
}

// openai/gpt-oss-20b's and -120b's config.json, key for key (quantization_config is added for
// --dtype mxfp4, as shipped). tiny keeps the real vocabulary, RoPE and YaRN but a window of 8.
ordered_json gpt_oss_config(const Shape& s, int sliding_window) {
  ordered_json layer_types = ordered_json::array();
  for (int l = 0; l < s.layers; ++l)
    layer_types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  return {{"architectures", {"GptOssForCausalLM"}},
          {"attention_bias", true},
          {"attention_dropout", 0.0},
          {"eos_token_id", 200002},
          {"experts_per_token", s.experts_per_tok},
          {"head_dim", s.head_dim},
          {"hidden_act", "silu"},
          {"hidden_size", s.hidden},
          {"initial_context_length", 4096},
          {"initializer_range", 0.02},
          {"intermediate_size", s.intermediate},
          {"layer_types", layer_types},
          {"max_position_embeddings", 131072},
          {"model_type", "gpt_oss"},
          {"num_attention_heads", s.heads},
          {"num_experts_per_tok", s.experts_per_tok},
          {"num_hidden_layers", s.layers},
          {"num_key_value_heads", s.kv_heads},
          {"num_local_experts", s.experts},
          {"output_router_logits", false},
          {"pad_token_id", 199999},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling",
           {{"beta_fast", 32.0},
            {"beta_slow", 1.0},
            {"factor", 32.0},
            {"original_max_position_embeddings", 4096},
            {"rope_type", "yarn"},
            {"truncate", false}}},
          {"rope_theta", 150000},
          {"router_aux_loss_coef", 0.9},
          {"sliding_window", sliding_window},
          {"swiglu_limit", 7.0},
          {"tie_word_embeddings", false},
          {"use_cache", true},
          {"vocab_size", 201088}};
}

ordered_json gpt_oss_preset(const std::string& preset) {
  if (preset == "tiny") return gpt_oss_config({32, 64, 2, 4, 2, 16, false, 8, 4}, 8);
  if (preset == "gpt-oss-20b")
    return gpt_oss_config({2880, 2880, 24, 64, 8, 64, false, 32, 4}, 128);
  if (preset == "gpt-oss-120b")
    return gpt_oss_config({2880, 2880, 36, 64, 8, 64, false, 128, 4}, 128);
  throw PresetError("--arch gpt_oss takes --preset tiny, gpt-oss-20b or gpt-oss-120b, got '" +
                    preset + "'");
}

// Qwen/Qwen3-Next-80B-A3B-Instruct's config.json keys (layer mix by full_attention_interval, as
// it ships). The sizes of the linear-attention heads, experts and shared expert come with it.
struct NextShape {
  Shape base;  // hidden, intermediate (dense layers), layers, heads, kv heads, head_dim, tied,
               // experts, experts per token, moe intermediate
  int shared_intermediate;
  int linear_key_heads, linear_value_heads, linear_key_dim, linear_value_dim;
  int full_attention_interval;
};

ordered_json qwen3_next_config(const NextShape& n, int max_positions) {
  const Shape& s = n.base;
  return {{"architectures", {"Qwen3NextForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"bos_token_id", 151643},
          {"decoder_sparse_step", 1},
          {"eos_token_id", 151645},
          {"full_attention_interval", n.full_attention_interval},
          {"head_dim", s.head_dim},
          {"hidden_act", "silu"},
          {"hidden_size", s.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", s.intermediate},
          {"linear_conv_kernel_dim", 4},
          {"linear_key_head_dim", n.linear_key_dim},
          {"linear_num_key_heads", n.linear_key_heads},
          {"linear_num_value_heads", n.linear_value_heads},
          {"linear_value_head_dim", n.linear_value_dim},
          {"max_position_embeddings", max_positions},
          {"mlp_only_layers", ordered_json::array()},
          {"model_type", "qwen3_next"},
          {"moe_intermediate_size", s.moe_intermediate},
          {"norm_topk_prob", true},
          {"num_attention_heads", s.heads},
          {"num_experts", s.experts},
          {"num_experts_per_tok", s.experts_per_tok},
          {"num_hidden_layers", s.layers},
          {"num_key_value_heads", s.kv_heads},
          {"num_nextn_predict_layers", 1},
          {"output_router_logits", false},
          {"partial_rotary_factor", 0.25},
          {"rms_norm_eps", 1e-06},
          {"rope_scaling", nullptr},
          {"rope_theta", 10000000},
          {"router_aux_loss_coef", 0.001},
          {"shared_expert_intermediate_size", n.shared_intermediate},
          {"tie_word_embeddings", s.tied},
          {"torch_dtype", "bfloat16"},
          {"use_cache", true},
          {"use_sliding_window", false},
          {"vocab_size", 151936}};
}

ordered_json qwen3_next_preset(const std::string& preset) {
  // tiny: the real vocabulary, 4 layers (three Gated DeltaNet, then full attention), 2 key and
  // 4 value heads in linear attention, a dense layer among the MoE ones, an MTP module.
  if (preset == "tiny") {
    ordered_json c =
        qwen3_next_config({{32, 64, 4, 4, 2, 16, false, 8, 2, 32}, 32, 2, 4, 8, 8, 4}, 4096);
    c["mlp_only_layers"] = {1};
    return c;
  }
  // tiny-interval2: full attention every second layer, one key head per two value heads of
  // different widths, no dense layer, and no MTP module (a checkpoint without one).
  if (preset == "tiny-interval2") {
    ordered_json c =
        qwen3_next_config({{32, 64, 4, 4, 1, 32, false, 8, 3, 16}, 16, 1, 2, 16, 8, 2}, 4096);
    c.erase("num_nextn_predict_layers");
    return c;
  }
  if (preset == "qwen3-next-80b-a3b")
    return qwen3_next_config(
        {{2048, 5120, 48, 16, 2, 256, false, 512, 10, 512}, 512, 16, 32, 128, 128, 4}, 262144);
  // The first 16 of its 48 layers (12 linear, 4 full attention): the cut a transformers BF16 peer
  // can hold on one 80 GB GPU (issue 39's peer comparison).
  if (preset == "qwen3-next-80b-a3b-16l")
    return qwen3_next_config(
        {{2048, 5120, 16, 16, 2, 256, false, 512, 10, 512}, 512, 16, 32, 128, 128, 4}, 262144);
  throw PresetError(
      "--arch qwen3_next takes --preset tiny, tiny-interval2, qwen3-next-80b-a3b or "
      "qwen3-next-80b-a3b-16l, got '" +
      preset + "'");
}

// The public heads' config.json keys (EAGLE's and SpecForge's LlamaForCausalLMEagle3 configs).
ordered_json eagle3_config(int hidden, int intermediate, int heads, int kv_heads, int head_dim,
                           int vocab, int draft_vocab, int max_positions, double eps) {
  return {{"architectures", {"LlamaForCausalLMEagle3"}},
          {"model_type", "llama"},
          {"hidden_act", "silu"},
          {"hidden_size", hidden},
          {"intermediate_size", intermediate},
          {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads},
          {"head_dim", head_dim},
          {"num_hidden_layers", 1},
          {"max_position_embeddings", max_positions},
          {"rms_norm_eps", eps},
          {"initializer_range", 0.02},
          {"pad_token_id", 0},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"use_cache", true},
          {"vocab_size", vocab},
          {"draft_vocab_size", draft_vocab}};
}

int target_int(const ordered_json& target, const char* key) {
  if (!target.contains(key) || !target[key].is_number_integer())
    throw PresetError(std::string("--target's config.json has no integer ") + key);
  return target[key].get<int>();
}

}  // namespace

ordered_json make_eagle3_head_config(const std::string& preset, const ordered_json* target) {
  if (preset == "llama-3.1-8b") {
    ordered_json c = eagle3_config(4096, 14336, 32, 8, 128, 128256, 32000, 2048, 1e-5);
    c["bos_token_id"] = 128000;
    c["eos_token_id"] = 128001;
    if (target != nullptr &&
        (target_int(*target, "hidden_size") != 4096 || target_int(*target, "vocab_size") != 128256))
      throw PresetError(
          "--preset llama-3.1-8b makes a head for Llama-3.1-8B (hidden 4096, vocab "
          "128256); --target is another model");
    return c;
  }
  if (preset != "tiny")
    throw PresetError("--arch llama_eagle3 takes --preset tiny or llama-3.1-8b, got '" + preset +
                      "'");
  if (target == nullptr)
    throw PresetError("--arch llama_eagle3 --preset tiny takes its shapes from --target DIR");
  const int hidden = target_int(*target, "hidden_size");
  const int heads = target_int(*target, "num_attention_heads");
  const int kv_heads =
      target->contains("num_key_value_heads") ? target_int(*target, "num_key_value_heads") : heads;
  const int head_dim =
      target->contains("head_dim") ? target_int(*target, "head_dim") : hidden / heads;
  const int vocab = target_int(*target, "vocab_size");
  const int layers = target_int(*target, "num_hidden_layers");
  const int positions = target->contains("max_position_embeddings")
                            ? target_int(*target, "max_position_embeddings")
                            : 4096;
  const double eps = target->value("rms_norm_eps", 1e-6);
  ordered_json c = eagle3_config(hidden, target_int(*target, "intermediate_size"), heads, kv_heads,
                                 head_dim, vocab, std::max(1, vocab / 2), positions, eps);
  // vLLM's default (2, L/2, L-3) names three different layers from L = 7 on.
  if (layers < 7) {
    if (layers < 3)
      throw PresetError("--target has " + std::to_string(layers) +
                        " layers; an EAGLE-3 head reads three different ones");
    c["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {0, layers / 2, layers - 1}},
                         {"use_aux_hidden_state", true}};
  }
  return c;
}

ordered_json make_generation_config(const ordered_json& config) {
  if (config.value("model_type", "") ==
      "gpt_oss")  // openai/gpt-oss-*'s: <|return|>, <|endoftext|>, <|call|>
    return {{"bos_token_id", 199998},
            {"eos_token_id", {200002, 199999, 200012}},
            {"pad_token_id", 199999},
            {"do_sample", false}};
  return {{"bos_token_id", config["bos_token_id"]},
          {"eos_token_id", config["eos_token_id"]},
          {"do_sample", false}};
}

ordered_json make_preset_config(const std::string& arch, const std::string& preset) {
  if (arch == "gpt_oss") return gpt_oss_preset(preset);
  if (arch == "qwen3_next") return qwen3_next_preset(preset);
  if (preset == "gpt-oss-20b" || preset == "gpt-oss-120b")
    throw PresetError("preset " + preset + " needs --arch gpt_oss");
  if (preset == "tiny-interval2" || preset == "qwen3-next-80b-a3b")
    throw PresetError("preset " + preset + " needs --arch qwen3_next");
  if (arch != "llama" && arch != "qwen3" && arch != "qwen3_moe")
    throw PresetError("--arch must be llama, qwen3, qwen3_moe, gpt_oss or qwen3_next, got '" +
                      arch + "'");
  const bool moe = arch == "qwen3_moe";
  Shape s{};
  if (preset == "tiny") {
    // Small enough to carry to the oracle machine: the embedding dominates (real vocabularies).
    s = {32, 64, 2, 4, 2, arch == "llama" ? 8 : 16, arch != "llama", 8, 2, 32};
    if (moe) {
      ordered_json c = qwen3_config(s, true);
      c["mlp_only_layers"] = {0};  // one dense layer and one MoE layer
      return c;
    }
  } else if (preset == "small") {
    s = {256, 768, 4, 8, 4, 32, false, 16, 4, 128};
  } else if (preset == "llama-3.1-8b") {
    if (arch != "llama") throw PresetError("preset llama-3.1-8b needs --arch llama");
    return llama_config({4096, 14336, 32, 32, 8, 128, false}, 131072);
  } else if (preset == "qwen3-8b") {
    if (arch != "qwen3") throw PresetError("preset qwen3-8b needs --arch qwen3");
    s = {4096, 12288, 36, 32, 8, 128, false};
  } else if (preset == "qwen3-30b-a3b") {
    if (arch != "qwen3_moe") throw PresetError("preset qwen3-30b-a3b needs --arch qwen3_moe");
    s = {2048, 6144, 48, 32, 4, 128, false, 128, 8, 768};
  } else {
    throw PresetError(
        "--preset must be tiny, small, llama-3.1-8b, qwen3-8b or qwen3-30b-a3b, got '" + preset +
        "'");
  }
  return arch == "llama" ? llama_config(s, 131072) : qwen3_config(s, moe);
}

}  // namespace nibble::tools
