#include "engine/backend/zero_centred_norms.h"

namespace nibble::backend {
namespace {

void add_one(std::vector<float>& weight) {
  for (float& w : weight) w += 1.0f;
}

}  // namespace

model::ModelDescription fold_zero_centred_norms(model::ModelWeights& weights,
                                                model::ModelDescription description) {
  for (std::size_t l = 0; l < description.layers.size(); ++l) {
    model::LayerSpec& spec = description.layers[l];
    if (spec.norm != model::NormKind::kRmsZeroCentred) continue;
    model::LayerWeights& w = weights.layers[l];
    add_one(w.input_norm);
    add_one(w.post_attention_norm);
    add_one(w.q_norm);  // empty where the layer has no q/k norm
    add_one(w.k_norm);
    add_one(w.hidden_norm);  // EAGLE-3's first layer only (empty elsewhere)
    spec.norm = model::NormKind::kRms;
  }
  if (description.final_norm == model::NormKind::kRmsZeroCentred) {
    add_one(weights.final_norm);
    // An MTP module's input norms are of the final norm's kind (decoder_forward.h).
    if (description.input == model::ModelInput::kEmbeddingAndHidden && weights.mtp) {
      add_one(weights.mtp->embedding_norm);
      add_one(weights.mtp->hidden_norm);
    }
    description.final_norm = model::NormKind::kRms;
  }
  return description;
}

}  // namespace nibble::backend
