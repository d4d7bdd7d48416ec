#include "engine/backend/select_backend.h"

#include <spdlog/spdlog.h>

#include "engine/backend/cpu/cpu_backend.h"
#ifdef NIBBLE_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace nibble::backend {

bool backend_uses_cuda(const std::string& device) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw BackendError("--device must be auto, cpu or cuda, got '" + device + "'");
  if (device == "cpu") return false;
#ifdef NIBBLE_HAVE_CUDA_BACKEND
  std::string why;
  if (cuda_device_available(&why)) return true;
  if (device == "cuda") throw BackendError("--device cuda: " + why);
  spdlog::info("no usable CUDA device ({}): running on the CPU backend", why);
  return false;
#else
  if (device == "cuda")
    throw BackendError("--device cuda: this build has no CUDA backend (configure with CUDA)");
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const BackendOptions& options, model::ModelWeights weights) {
#ifdef NIBBLE_HAVE_CUDA_BACKEND
  if (backend_uses_cuda(options.device)) return make_cuda_backend(std::move(weights), options.cuda);
#else
  (void)backend_uses_cuda(options.device);
#endif
  return make_cpu_backend(std::move(weights), options.cpu_threads);
}

}  // namespace nibble::backend
