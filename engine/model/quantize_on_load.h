#pragma once
// Quantizing a dense model to NVFP4 in memory, after loading (`generate --quantization nvfp4`):
// the same projections nibble-quantize converts (attention, linear attention's in/out
// projections, MLP, experts, shared experts); embeddings, lm_head, norms, MoE routers and the
// shared-expert gate stay as loaded.
#include "engine/model/model_weights.h"

namespace nibble::model {

// Returns the number of Linears converted; already-quantized ones are left alone.
int quantize_weights_nvfp4(ModelWeights& weights);

}  // namespace nibble::model
