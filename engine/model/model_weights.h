#pragma once
// A whole model in memory: config plus every weight, named by the Hugging Face layout
// (model.embed_tokens, model.layers.N.{self_attn,mlp}..., model.norm, lm_head).
// Shapes below: H = hidden_size, D = head_dim, Hq/Hkv = query/kv heads, I = intermediate size.
#include <filesystem>
#include <optional>
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

// A Gated DeltaNet layer's weights (model.layers.N.linear_attn.*; shapes by
// kernels/linear_attention/gated_deltanet_shape.h: Kh/Vh key/value heads of Dk/Dv dims, group
// G = Vh / Kh, conv_dim = 2 Kh Dk + Vh Dv, kernel K).
struct LinearAttentionWeights {
  Linear in_proj_qkvz;             // [Kh (2 Dk + 2 G Dv), H], grouped per key head
  Linear in_proj_ba;               // [2 Vh, H], grouped per key head: b (G), a (G)
  std::vector<float> conv_weight;  // [conv_dim, K] (conv1d.weight [conv_dim, 1, K])
  std::vector<float> A_log;        // [Vh]
  std::vector<float> dt_bias;      // [Vh]
  std::vector<float> norm;         // [Dv], the gated RMSNorm's plain weight
  Linear out_proj;                 // [H, Vh Dv]
};

struct LayerWeights {
  std::vector<float> input_norm;            // [H]
  std::vector<float> hidden_norm;           // [H] EAGLE-3's first layer (reads_embedding)
  std::vector<float> post_attention_norm;   // [H]
  Linear q, k, v;                           // [Hq*D, H] ([Hq*2D, H]: per head query then gate,
                                            // with an output gate), [Hkv*D, H], [Hkv*D, H];
                                            // in 2H where the layer reads_embedding
  Linear o;                                 // [H, Hq*D]
  std::vector<float> q_norm, k_norm;        // [D] when the layer has a q/k norm
  std::vector<float> sinks;                 // [Hq] when the layer has attention sinks
  LinearAttentionWeights linear_attention;  // MixerKind::kGatedDeltaNet (no q, k, v, o then)
  bool moe = false;
  Linear gate, up, down;  // dense MLP: [I, H], [I, H], [H, I]
  Linear router;          // MoE: [num_experts, H] (+ bias [num_experts] when router_bias)
  std::vector<ExpertWeights> experts;
  // MoE with a shared expert: its SwiGLU ([Is, H], [Is, H], [H, Is]) and its gate [1, H].
  Linear shared_gate, shared_up, shared_down, shared_expert_gate;
};

// A multi-token-prediction module (Qwen3-Next's mtp.*, the layout vLLM's qwen3_next_mtp.py
// loads): one more decoder layer that predicts the token after next from a token's embedding and
// the model's hidden state at the position before it. It shares the model's embedding and
// lm_head. Its norms are of the model's layers' kind (zero-centred in Qwen3-Next).
struct MtpWeights {
  std::vector<float> embedding_norm;  // [H] mtp.pre_fc_norm_embedding
  std::vector<float> hidden_norm;     // [H] mtp.pre_fc_norm_hidden
  Linear fc;                          // [H, 2H] mtp.fc: input concat(embedding, hidden), no bias
  LayerWeights layer;                 // mtp.layers.0: full attention (gated) and its MoE
  std::vector<float> norm;            // [H] mtp.norm
};

// An EAGLE-3 head's own input and vocabulary (ModelConfig::eagle3; eagle3_head.h loads it).
struct Eagle3Weights {
  Linear fc;  // [H, 3 * target H] fc.weight: the target's three hidden states to one
  // d2t: the target's id of each draft id (draft_vocab_size of them; the checkpoint stores the
  // offset target - draft); empty where the two vocabularies are the same.
  std::vector<int> draft_to_target;
};

struct ModelWeights {
  ModelConfig config;
  QuantConfig quant;
  std::vector<float> embed;  // [vocab, H]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [H]
  Linear lm_head;                 // [vocab, H]; a copy of embed when tied
  // The checkpoint's multi-token-prediction module, when it has one (mtp.fc.weight present); in
  // a model made by take_mtp_module, only its input (fc and the two norms: `layer` is in
  // layers[0] and `norm` is final_norm).
  std::optional<MtpWeights> mtp;
  std::optional<Eagle3Weights> eagle3;  // an EAGLE-3 head (eagle3_head.h)
};

// Loads config.json, the quantization config and every tensor; throws ModelError (also for an
// EAGLE-3 head's directory, which load_eagle3_head loads against its target).
ModelWeights load_model(const std::filesystem::path& dir);

struct LayerSpec;
class Checkpoint;
// One decoder layer's weights under prefix `p` ("model.layers.N.", "mtp.layers.0.",
// "midlayer."), as its spec says; throws ModelError for a tensor or bias the spec needs and the
// checkpoint lacks, or a shape that is not the config's.
LayerWeights load_layer(const Checkpoint& ck, const ModelWeights& m, const std::string& p,
                        const LayerSpec& spec, const std::filesystem::path& dir);

// The model's MTP module as a model of its own (ModelConfig::mtp_module): its layer as layers[0],
// mtp.norm as the final norm, copies of the embedding and lm_head. Moves the module out of
// `model` (model.mtp is empty after). Throws ModelError when model has none.
ModelWeights take_mtp_module(ModelWeights& model);

}  // namespace nibble::model
