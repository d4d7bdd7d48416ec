#pragma once
// The CUDA backend: the whole forward pass on one GPU. BF16 activations and KV cache, NVFP4
// linears through the W4A16 kernels (kernels/nvfp4_linear.h), dense ones through cuBLAS,
// paged grouped-query attention, MoE experts run over their routed rows. Its parts, one concern
// a file beside it: device_model (weights), device_linear (the linears), device_kv_cache,
// step_buffers (activations), forward_pass (the ops of decoder_forward.h), swiglu_block and
// moe_block, device_sampler, decode_graph_runner (graph capture and replay). Checked against
// the CPU backend (tests/backend/test_cuda_backend.cpp).
#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/backend_options.h"
#include "engine/model/model_weights.h"

namespace nibble::backend {

// True when a CUDA device can be used; otherwise false and, if `why` is given, the reason.
bool cuda_device_available(std::string* why = nullptr);

// Uploads the weights to the current device (the host copies are released as they go).
// Throws BackendError when there is no usable device or the model does not fit.
std::unique_ptr<Backend> make_cuda_backend(model::ModelWeights weights,
                                           const CudaOptions& options = {});

}  // namespace nibble::backend
