#pragma once
// The forward pass every backend runs: one model description (engine/model/model_description.h)
// walked in one place, each block computed by the backend's ops. A backend implements the ops
// for one step over its own activations; it never walks the layers itself, so a new
// architecture is a description plus the ops it lacks, not a second forward pass.
//
// The ops of one step, in the order run_decoder calls them:
//   embed()                          x = embedding rows of the step's tokens          [T, H]
//   or embed_with_hidden(norm)       x = fc(concat(norm(embedding), norm(hidden_in))) (an MTP
//                                    module: ModelInput::kEmbeddingAndHidden)
//   or eagle3_input()                x = hidden_in (through fc where it is the target's), the
//                                    embedding kept for the first attention (ModelInput::kEagle3)
//   keep_hidden_state(i)             before a layer of description.hidden_state_layers: x kept
//                                    as the i-th hidden state handed out (hidden_out)
//   attention(l, norm, spec)         x += o(attention(rope(q, k), v)) of norm(x), keys and values
//                                    stored in the KV cache at the step's positions
//   or gated_deltanet(l, norm, spec) x += out_proj(Gated DeltaNet mixing of norm(x)), each
//                                    sequence's recurrent state read and advanced in its slot
//   mlp(l, norm, spec)               x += down(silu(gate(h)) * up(h)), h = norm(x)
//   moe(l, norm, spec)               x += sum over the top-k experts of h = norm(x), weighted
//   logits(norm)                     the rows that want a next token: lm_head(norm(x))
// Each op reads the layer's weights by index; the specs say what the layer computes.

#include "engine/model/model_description.h"

namespace nibble::backend {

class DecoderOps {
 public:
  virtual ~DecoderOps() = default;
  virtual void embed() = 0;
  virtual void attention(int layer, model::NormKind norm, const model::AttentionSpec& spec) = 0;
  virtual void gated_deltanet(int layer, model::NormKind norm,
                              const model::LinearAttentionSpec& spec) = 0;
  virtual void embed_with_hidden(model::NormKind norm) = 0;
  virtual void eagle3_input() = 0;
  virtual void keep_hidden_state(int index) = 0;
  virtual void mlp(int layer, model::NormKind norm, const model::MlpSpec& spec) = 0;
  virtual void moe(int layer, model::NormKind norm, const model::MoeSpec& spec) = 0;
  virtual void logits(model::NormKind norm) = 0;
};

inline void run_decoder(const model::ModelDescription& model, DecoderOps& ops) {
  switch (model.input) {
    case model::ModelInput::kEmbedding:
      ops.embed();
      break;
    case model::ModelInput::kEmbeddingAndHidden:
      ops.embed_with_hidden(model.final_norm);
      break;
    case model::ModelInput::kEagle3:
      ops.eagle3_input();
      break;
  }
  for (int l = 0; l < int(model.layers.size()); ++l) {
    const model::LayerSpec& layer = model.layers[std::size_t(l)];
    for (std::size_t i = 0; i < model.hidden_state_layers.size(); ++i)
      if (model.hidden_state_layers[i] == l) ops.keep_hidden_state(int(i));
    switch (layer.mixer) {
      case model::MixerKind::kAttention:
        ops.attention(l, layer.norm, layer.attention);
        break;
      case model::MixerKind::kGatedDeltaNet:
        ops.gated_deltanet(l, layer.norm, layer.linear_attention);
        break;
    }
    switch (layer.ffn.kind) {
      case model::FfnKind::kMlp:
        ops.mlp(l, layer.norm, layer.ffn.mlp);
        break;
      case model::FfnKind::kMoe:
        ops.moe(l, layer.norm, layer.ffn.moe);
        break;
    }
  }
  ops.logits(model.final_norm);
}

}  // namespace nibble::backend
