#pragma once
// What a model asks of a backend beyond the layers every backend runs (RMSNorm pre-norm layers,
// plain or zero-centred, RoPE plain, Llama 3.1-scaled or partial, q/k/v biases, q/k norms, gated
// attention output, Gated DeltaNet linear attention, SwiGLU MLPs, softmax-then-top-k MoE over
// per-expert BF16 or NVFP4 weights with or without a shared expert). A backend that lacks a feature
// refuses the model at load with a message naming it, rather than run it wrongly or crash on
// weights it cannot read.
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_description.h"
#include "engine/model/model_weights.h"

namespace nibble::backend {

// The features `model` (described by `description`) uses beyond the baseline, each named as a
// user would read it ("attention sinks", "MXFP4 weights", ...), in a fixed order; empty: none.
std::vector<std::string> features_beyond_baseline(const model::ModelWeights& model,
                                                  const model::ModelDescription& description);

// Throws BackendError "<backend> backend: <architecture> uses A, B, which the <backend> backend
// does not implement yet; run it with --device cpu" when the model uses any.
void refuse_features_beyond_baseline(const model::ModelWeights& model, std::string_view backend);

}  // namespace nibble::backend
