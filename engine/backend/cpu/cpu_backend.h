#pragma once
// The CPU reference backend: the FP32 ops (cpu/cpu_forward.h) of the one forward pass
// (decoder_forward.h) for every supported architecture, NVFP4 weights dequantized on the fly,
// work spread over a thread pool. Slow and obviously correct; GPU kernels are checked against it.
#include <memory>

#include "engine/backend/backend.h"
#include "engine/model/model_weights.h"

namespace nibble::backend {

// threads <= 0 means one per hardware thread.
std::unique_ptr<Backend> make_cpu_backend(model::ModelWeights weights, int threads);

}  // namespace nibble::backend
