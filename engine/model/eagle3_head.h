#pragma once
// An EAGLE-3 draft head's checkpoint directory (speculative decoding's `eagle3` method), as the
// public heads ship it and vLLM's llama_eagle3.py loads it: config.json (LlamaForCausalLMEagle3
// or Eagle3LlamaForCausalLM; ModelConfig::eagle3) and safetensors with
//   midlayer.{input_layernorm, hidden_norm, post_attention_layernorm}.weight  [H]
//   midlayer.self_attn.{q,k,v}_proj.weight  [heads * head_dim, 2H]; o_proj [H, Hq * head_dim]
//   midlayer.mlp.{gate,up,down}_proj.weight  (Llama's SwiGLU)
//   fc.weight [H, 3 * target_hidden_size]    norm.weight [H]    lm_head.weight [draft_vocab, H]
//   d2t [draft_vocab] integers (target id = draft id + d2t[draft id]; absent: the same ids)
//   embed_tokens.weight [vocab, H] (optional: the target's embedding otherwise)
//   t2d [vocab] booleans (read by nobody: vLLM skips it too)
#include <filesystem>
#include <vector>

#include "engine/model/model_weights.h"

namespace nibble::model {

// The head as a model of its own (ModelInput::kEagle3): its layer as layers[0], norm.weight as
// the final norm, lm_head of draft_vocab_size rows, fc and d2t in `eagle3`, and the target's
// embedding (copied) unless the checkpoint has its own. Its max_context is at least the
// target's: it runs at the target's positions. Throws ModelError naming the directory and the
// tensor or field: a directory that is not an EAGLE-3 head, a head of another vocabulary or
// hidden size than `target`, a missing tensor or one of the wrong shape, a d2t entry outside the
// target's vocabulary.
ModelWeights load_eagle3_head(const std::filesystem::path& dir, const ModelWeights& target);

// The target's layers whose inputs the head reads, ascending: the head's
// eagle_aux_hidden_state_layer_ids, else vLLM's default (2, L / 2, L - 3) for a target of
// `target_layers` layers. Throws ModelError where they are not three different layers of the
// target.
std::vector<int> eagle3_target_layers(const Eagle3HeadConfig& head, int target_layers);

}  // namespace nibble::model
