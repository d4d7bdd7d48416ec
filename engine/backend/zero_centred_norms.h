#pragma once
// Zero-centred RMSNorms (x / rms(x) * (1 + w), Qwen3-Next) as plain ones: a backend that folds the
// +1 into its copy of the weights at load runs them with its plain RMSNorm (x / rms(x) * w'),
// w' = 1 + w, and needs no kernel of its own. The gated RMSNorm inside linear attention is plain
// (its weight is stored as is) and is left alone.
#include "engine/model/model_description.h"
#include "engine/model/model_weights.h"

namespace nibble::backend {

// Adds 1 to every weight of each norm `description` marks kRmsZeroCentred (a layer's input and
// post-attention norms, its q/k norms and EAGLE-3's hidden norm, the final norm and, for an MTP
// module, its input's two norms, which are of the final norm's kind) and returns the description
// with those norms kRms. A description without zero-centred norms comes back unchanged, the weights
// too.
model::ModelDescription fold_zero_centred_norms(model::ModelWeights& weights,
                                                model::ModelDescription description);

}  // namespace nibble::backend
