#pragma once
// What a model asks of a backend beyond the layers every backend runs (RMSNorm pre-norm layers,
// plain or zero-centred, RoPE plain, Llama 3.1-scaled, YaRN or partial, q/k/v and o biases, q/k
// norms, gated attention output, attention sinks, per-layer sliding windows, Gated DeltaNet linear
// attention, SwiGLU MLPs, MoE routed softmax-then-top-k or top-k-then-softmax with or without a
// router bias, over per-expert BF16 or NVFP4 weights with or without a shared expert, or gpt-oss's
// fused interleaved experts with biases and the clamped SwiGLU in BF16, NVFP4 or MXFP4). A backend
// that lacks a feature refuses the model at load with a message naming it, rather than run it
// wrongly or crash on weights it cannot read. Shapes a backend's kernels cannot take are that
// backend's own refusal (the CUDA backend's refuse_shapes_beyond_kernels).
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_description.h"
#include "engine/model/model_weights.h"

namespace nibble::backend {

// The features `model` (described by `description`) uses beyond the baseline, each named as a
// user would read it, in a fixed order; empty: none. Today none: both backends run every
// feature of the models described (model_features.cpp).
std::vector<std::string> features_beyond_baseline(const model::ModelWeights& model,
                                                  const model::ModelDescription& description);

// Throws BackendError "<backend> backend: <architecture> uses A, B, which the <backend> backend
// does not implement yet; run it with --device cpu" when the model uses any.
void refuse_features_beyond_baseline(const model::ModelWeights& model, std::string_view backend);

}  // namespace nibble::backend
