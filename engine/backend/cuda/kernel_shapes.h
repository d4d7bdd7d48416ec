#pragma once
// The model shapes the CUDA backend's kernels cannot run, refused at load (before anything reaches
// the device) with a message saying what they take: attention heads (kernels/attention/
// paged_attention.h), partial RoPE (kernels/layer/layer_ops.h), Gated DeltaNet layers
// (kernels/linear_attention/gated_deltanet.h) and gpt-oss's experts (the decode fusions of
// kernels/moe/moe_experts.h are their only device form). Host code: runs without a GPU.
#include "engine/model/model_config.h"

namespace nibble::backend::cuda {

// Throws BackendError "cuda backend: runs ...; this model has ..." for the first shape `c` has
// that the kernels do not take.
void refuse_shapes_beyond_kernels(const model::ModelConfig& c);

}  // namespace nibble::backend::cuda
