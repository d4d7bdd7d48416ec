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

// How a norm scales its normalised input: x / rms(x) * w (Llama's RMSNorm, every architecture
// so far).
enum class NormKind { kRms };

// Softmax attention over the KV cache: grouped-query heads, RoPE (ModelConfig::rope) on q and k.
struct AttentionSpec {
  bool qkv_bias = false;  // q, k and v projections add a bias (Qwen2)
  bool qk_norm = false;   // an RMSNorm over each head of q and of k before RoPE (Qwen3)
};

// SwiGLU: down(silu(gate(h)) * up(h)).
struct MlpSpec {
  int intermediate_size = 0;
};

// A sparse mixture of SwiGLU experts: a linear router scores every expert, the top_k run, and
// their outputs add up weighted by the softmax of the scores (renormalised over the top_k when
// norm_topk_prob).
struct MoeSpec {
  int experts = 0;
  int top_k = 0;
  int intermediate_size = 0;  // each expert's
  bool norm_topk_prob = false;
};

enum class FfnKind { kMlp, kMoe };

struct FfnSpec {
  FfnKind kind = FfnKind::kMlp;
  MlpSpec mlp;  // kMlp
  MoeSpec moe;  // kMoe
};

struct LayerSpec {
  NormKind norm = NormKind::kRms;  // the input and post-attention norms
  AttentionSpec attention;
  FfnSpec ffn;
};

struct ModelDescription {
  std::vector<LayerSpec> layers;  // in order, one per decoder layer
  NormKind final_norm = NormKind::kRms;
  bool tied_embeddings = false;  // lm_head is the embedding matrix
};

// The description of `config`'s architecture at its sizes; throws ModelError for an
// architecture without one.
ModelDescription describe_model(const ModelConfig& config);

}  // namespace nibble::model
