#pragma once
// Quantizing a dense model to NVFP4 in memory, after loading (`generate --quantization nvfp4`):
// the same projections nibble-quantize converts (attention, MLP, experts); embeddings, lm_head,
// norms and MoE routers stay as loaded.
#include "engine/model/model_weights.h"

namespace nibble::model {

// Returns the number of Linears converted; already-quantized ones are left alone.
int quantize_weights_nvfp4(ModelWeights& weights);

}  // namespace nibble::model
