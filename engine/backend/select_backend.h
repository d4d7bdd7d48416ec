#pragma once
// --device auto|cpu|cuda -> a backend. auto takes the GPU when this build has the CUDA backend
// and a device is present, the CPU otherwise (and says which, and why, in the log).
#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/backend_options.h"
#include "engine/model/model_weights.h"

namespace nibble::backend {

// options.device picks the backend; the backend takes its own part of the options. Throws
// BackendError for --device cuda without a CUDA build or device, or an unknown device.
std::unique_ptr<Backend> make_backend(const BackendOptions& options, model::ModelWeights weights);

// Whether make_backend(device, ...) would choose the CUDA backend, without loading anything.
bool backend_uses_cuda(const std::string& device);

}  // namespace nibble::backend
