#pragma once
// The CUDA backend: the whole forward pass on one GPU. BF16 activations and KV cache, NVFP4
// linears through the W4A16 kernels (kernels/nvfp4_linear.h), dense ones through cuBLAS,
// paged grouped-query attention, MoE experts run over their routed rows. Checked against the CPU
// backend (tests/gpu/test_cuda_backend.cpp).
#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/model/model_weights.h"

namespace nibble::backend {

// True when a CUDA device can be used; otherwise false and, if `why` is given, the reason.
bool cuda_device_available(std::string* why = nullptr);

// Uploads the weights to the current device (the host copies are released as they go).
// Throws BackendError when there is no usable device or the model does not fit.
std::unique_ptr<Backend> make_cuda_backend(model::ModelWeights weights);

}  // namespace nibble::backend
