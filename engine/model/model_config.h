#pragma once
// config.json -> ModelConfig (the sizes) for the architectures Nibble runs; what each
// architecture's layers compute is its description (model_description.h, architectures/).
// Anything that would change the math in a way we do not implement (other rope types, sliding
// windows in use, biases, activations) is refused with a ModelError naming the field, rather
// than run wrongly.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace nibble::model {

enum class Arch { Llama, Mistral, Qwen2, Qwen3, Qwen3Moe, GptOss, Qwen3Next, LlamaEagle3 };

struct RopeConfig {
  double theta = 10000.0;
  bool llama3 = false;  // Llama 3.1 frequency scaling (rope_type "llama3")
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
  // YaRN (rope_type "yarn", as transformers' _compute_yarn_parameters): frequencies blended
  // between `factor`-interpolated and original over the dimensions whose rotations at
  // original_max_position_embeddings fall between beta_fast and beta_slow (bounds floored and
  // ceiled when `truncate`), and q and k scaled by attention_factor after rotation.
  bool yarn = false;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  double attention_factor = 1.0;  // 1 unless yarn
};

// An EAGLE-3 draft head (architectures/llama_eagle3.cpp; speculative decoding's `eagle3`
// method, as vLLM's llama_eagle3.py runs it): one Llama decoder layer whose attention reads
// the token's embedding beside a hidden state, predicting over a vocabulary of its own.
struct Eagle3HeadConfig {
  int draft_vocab_size = 0;    // lm_head's rows; d2t maps them to the target's ids
  int target_hidden_size = 0;  // the width of each of the target's hidden states fc reads
  // The target's layers whose input hidden states the head reads (config.json's
  // eagle_aux_hidden_state_layer_ids, at the top or in eagle_config); empty: vLLM's default
  // (2, L / 2, L - 3) of the target's L layers (eagle3_target_layers).
  std::vector<int> aux_layers;
  // The layer's residual is hidden_norm(h) rather than h (vLLM's norm_before_residual).
  bool norm_before_residual = false;
  int fc_inputs() const { return 3 * target_hidden_size; }  // fc: [hidden_size, 3 * target H]
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string architecture;  // as written in config.json, e.g. "Qwen3ForCausalLM"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;  // dense MLP
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  // RoPE rotates the first rotary_dim dimensions of each head (head_dim * partial_rotary_factor;
  // Qwen3-Next's 0.25) and passes the rest through; 0 (a config built in code): all of them.
  int rotary_dim = 0;
  int rope_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  float rms_norm_eps = 1e-6f;
  RopeConfig rope;
  int max_position_embeddings = 0;
  int max_context = 0;  // positions we can run exactly (min of max positions and sliding window)
  bool tie_word_embeddings = false;
  // Mixture of experts (Qwen3-MoE; which layers route: model_description.h); 0 experts: every
  // layer is dense.
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
  // gpt-oss: biases on q, k, v and o; per-layer attention windows (layer_types): 0 is full
  // attention, else the query sees its latest `window` positions, itself included; the experts'
  // clamped SwiGLU limit.
  bool attention_bias = false;
  std::vector<int> layer_windows;
  double swiglu_limit = 7.0;
  // Qwen3-Next: which layers mix tokens by Gated DeltaNet (layer_types "linear_attention")
  // instead of attention, and those layers' heads and causal conv; the shared expert beside the
  // routed ones (0: none).
  std::vector<bool> linear_attention_layers;
  int linear_num_key_heads = 0, linear_num_value_heads = 0;
  int linear_key_head_dim = 0, linear_value_head_dim = 0;
  int linear_conv_kernel_dim = 0;
  int shared_expert_intermediate_size = 0;
  // Multi-token prediction (Qwen3-Next's mtp.* module, speculative decoding's `mtp` method):
  // the layers config.json's num_nextn_predict_layers declares (0 when absent; the module is
  // loaded when the checkpoint has it, model_weights.h). mtp_module: this config describes such
  // a module run as a model of its own (mtp_module_config): num_layers 1, a full-attention layer
  // whose input combines each token's embedding with a hidden state (ModelInput in
  // model_description.h).
  int num_nextn_predict_layers = 0;
  bool mtp_module = false;
  // Set: this config is an EAGLE-3 draft head's (Eagle3HeadConfig); its logits are
  // draft_vocab_size wide (logits_size) while its embedding keeps vocab_size rows.
  std::optional<Eagle3HeadConfig> eagle3;
  // The layers whose input hidden states (the residual stream entering them) the model hands out
  // per token (BatchItem::hidden_out), concatenated in ascending layer order: an EAGLE-3 head's
  // target (set by whoever loads the head, eagle3_target_layers). Empty: the last layer's
  // output, one hidden state per token.
  std::vector<int> hidden_state_layers;

  int logits_size() const { return eagle3 ? eagle3->draft_vocab_size : vocab_size; }
  // Floats of one token's hidden state handed out (BatchItem::hidden_out).
  int hidden_state_width() const {
    return hidden_size * std::max<int>(1, int(hidden_state_layers.size()));
  }
};

// Throws ModelError naming `source` (the config path) and the offending field.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& model_dir);

}  // namespace nibble::model
