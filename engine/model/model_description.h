#pragma once
// What a model computes, layer by layer: the one description every backend runs (each backend
// supplies the ops, engine/backend/decoder_forward.h; none asks which architecture it runs).
// Each architecture says how its layers look in engine/model/architectures/; adding one means a
// description there plus whatever ops the backends lack.
//
// Every layer is pre-norm: x += attention(norm(x)); x += ffn(norm(x)). Shapes and sizes come
// from the ModelConfig beside the description (hidden size, heads, head_dim, RoPE, experts).
#include <vector>

#include "engine/model/model_config.h"

namespace nibble::model {

// How a norm scales its normalised input.
enum class NormKind {
  kRms,             // x / rms(x) * w (Llama's RMSNorm)
  kRmsZeroCentred,  // x / rms(x) * (1 + w): weights stored around 0 (Qwen3-Next, Gemma 3)
};

// Softmax attention over the KV cache: grouped-query heads, RoPE (ModelConfig::rope) on q and k.
struct AttentionSpec {
  bool qkv_bias = false;  // q, k and v projections add a bias (Qwen2, gpt-oss)
  bool o_bias = false;    // the output projection adds a bias (gpt-oss)
  bool qk_norm = false;   // an RMSNorm over each head of q and of k before RoPE (Qwen3)
  // One learned logit per query head (self_attn.sinks) joins each softmax's denominator and
  // weighs no value: weights exp(s_p) / (sum_p exp(s_p) + exp(sink)) (gpt-oss).
  bool sinks = false;
  // 0: the query at position p sees [0, p]; else only [p - window + 1, p] (gpt-oss's
  // sliding_attention layers; transformers' kv_idx > q_idx - sliding_window).
  int sliding_window = 0;
  // q_proj's output holds, per head, the query then as many gate values: the attention output
  // is multiplied by sigmoid(gate) before o_proj (Qwen3-Next's gated attention).
  bool output_gate = false;
  // EAGLE-3's draft layer (ModelInput::kEagle3): q, k and v read
  // concat(input_layernorm(embedding), hidden_norm(x)) [2H] instead of input_layernorm(x), the
  // embedding of the row's token; the residual stays x, or is hidden_norm(x) with
  // norm_before_residual.
  bool reads_embedding = false;
  bool norm_before_residual = false;
};

// Gated DeltaNet linear attention (Qwen3-Next's "linear_attention" layers): in_proj_qkvz and
// in_proj_ba grouped per key head, a causal depthwise conv1d + SiLU over q, k, v, the gated
// delta rule over a per-sequence recurrent state, a gated RMSNorm with z, out_proj
// (kernels/linear_attention/gated_deltanet_ref.h computes everything between the projections).
// Its state lives in the sequence's state slot, not in the KV cache.
struct LinearAttentionSpec {
  int key_heads = 0, value_heads = 0;  // value_heads % key_heads == 0
  int key_head_dim = 0, value_head_dim = 0;
  int conv_kernel = 0;
};

// Which block mixes tokens in a layer.
enum class MixerKind {
  kAttention,      // AttentionSpec over the paged KV cache
  kGatedDeltaNet,  // LinearAttentionSpec over the sequence's recurrent state
};

// SwiGLU: down(silu(gate(h)) * up(h)).
struct MlpSpec {
  int intermediate_size = 0;
};

// How router scores become the top_k experts' weights.
enum class MoeRouting {
  kSoftmaxTopK,  // softmax over every expert, keep the top_k (renormalised: norm_topk_prob)
  kTopKSoftmax,  // keep the top_k scores, softmax over those k (gpt-oss)
};

// What an expert computes between its gate/up and down projections.
enum class ExpertActivation {
  kSwiGlu,         // silu(gate) * up
  kClampedSwiGlu,  // gate <= limit, up in [-limit, limit], (up + 1) * gate * sigmoid(alpha * gate)
};

// How a checkpoint stores the experts (the loader and the model tools read this).
enum class ExpertLayout {
  // mlp.gate (router), mlp.experts.E.{gate,up,down}_proj (Qwen3-MoE)
  kPerExpert,
  // mlp.router, mlp.experts.{gate_up_proj, down_proj} for all experts in one tensor each, with
  // biases; gate_up's outputs interleave gate and up (row 2j gate j, row 2j+1 up j); BF16
  // as transformers' [E, in, out] or MXFP4 *_blocks/*_scales as [E, out, in] (gpt-oss)
  kFusedInterleaved,
};

// A sparse mixture of gated experts: a linear router scores every expert, the top_k run, and
// their outputs add up weighted as `routing` says.
struct MoeSpec {
  int experts = 0;
  int top_k = 0;
  int intermediate_size = 0;  // each expert's
  bool norm_topk_prob = false;
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  bool router_bias = false;  // the router adds a bias (gpt-oss)
  bool expert_bias = false;  // each expert's gate/up and down add biases (gpt-oss)
  ExpertActivation activation = ExpertActivation::kSwiGlu;
  float swiglu_alpha = 1.702f;  // kClampedSwiGlu
  float swiglu_limit = 7.0f;    // kClampedSwiGlu
  ExpertLayout layout = ExpertLayout::kPerExpert;
  // A shared expert every token runs beside the routed ones (0: none): a SwiGLU of this width
  // (mlp.shared_expert.{gate,up,down}_proj) whose output is scaled by
  // sigmoid(mlp.shared_expert_gate(h)), one scalar per token (Qwen2-MoE, Qwen3-Next).
  int shared_expert_intermediate_size = 0;
};

enum class FfnKind { kMlp, kMoe };

struct FfnSpec {
  FfnKind kind = FfnKind::kMlp;
  MlpSpec mlp;  // kMlp
  MoeSpec moe;  // kMoe
};

struct LayerSpec {
  NormKind norm = NormKind::kRms;  // the input and post-attention norms, and q/k norms
  MixerKind mixer = MixerKind::kAttention;
  AttentionSpec attention;               // kAttention
  LinearAttentionSpec linear_attention;  // kGatedDeltaNet
  FfnSpec ffn;
};

// What the first layer reads.
enum class ModelInput {
  kEmbedding,  // the embedding rows of the step's tokens
  // A multi-token-prediction module (Qwen3-Next's mtp.*, as vLLM's Qwen3NextMultiTokenPredictor):
  // fc(concat(norm_e(embedding), norm_h(hidden))), the hidden state another model handed the
  // token (BatchItem::hidden_in), both norms of the layers' kind; its output hidden state is
  // taken after the final norm (BatchItem::hidden_out), which is what vLLM chains drafts on.
  kEmbeddingAndHidden,
  // An EAGLE-3 draft head (ModelConfig::eagle3, as vLLM's llama_eagle3.py): the residual stream
  // starts as the hidden state each token brings (BatchItem::hidden_in): the target's hidden
  // states concatenated (3 * target_hidden_size floats) through fc, or the head's own earlier
  // output (hidden_size floats) as it is; its first layer reads the embedding too
  // (AttentionSpec::reads_embedding). Its output hidden state is taken before the final norm.
  kEagle3,
};

struct ModelDescription {
  ModelInput input = ModelInput::kEmbedding;
  std::vector<LayerSpec> layers;  // in order, one per decoder layer
  // ModelConfig::hidden_state_layers: the layers whose input the step keeps (ascending).
  std::vector<int> hidden_state_layers;
  NormKind final_norm = NormKind::kRms;
  bool tied_embeddings = false;  // lm_head is the embedding matrix
  // Whether any layer keeps a recurrent state per sequence (a hybrid model): such a model runs
  // each sequence in a state slot and cannot reuse a cached KV prefix (it has no state for it).
  bool has_recurrent_state() const {
    for (const LayerSpec& l : layers)
      if (l.mixer == MixerKind::kGatedDeltaNet) return true;
    return false;
  }
};

// The description of `config`'s architecture at its sizes; throws ModelError for an
// architecture without one.
ModelDescription describe_model(const ModelConfig& config);

// The config of `config`'s multi-token-prediction module run as a model of its own
// (ModelConfig::mtp_module): the same sizes, one layer, full attention, routed as the model's
// layer 0 (vLLM builds the module's layer with layer index 0).
ModelConfig mtp_module_config(const ModelConfig& config);

}  // namespace nibble::model
