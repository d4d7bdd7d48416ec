#pragma once
// A MoE layer on the device: x = x2 + the top-k experts of h (Activations, step_buffers.h). The
// router's scores, routing, grouped expert GEMMs and the weighted combine all on the device with
// no synchronisation (kernels/moe/moe_experts.h) where the layer's experts are grouped NVFP4 or
// MXFP4 tables; otherwise, or when options.host_routing (not for MXFP4 experts, which only the
// grouped kernels run), the scores go to the host, which routes (one synchronisation a layer) and
// runs each expert over its slice of the gathered rows.
// gpt-oss's layers (model::MoeSpec): the router's bias (FP32 beside an unfused router, BF16 in the
// fused one), top-k-then-softmax routing (MoeScoring::top_k_first), experts with interleaved
// gate/up rows, biases and the clamped SwiGLU: on the device through the decode fusions, which a
// prefill-sized step runs in 16-row blocks (slow: each expert's weights are read once per 16 of
// its rows; kernels/moe/moe_experts.h); on the host path as a linear, clamped_swiglu_interleaved
// and a linear per expert.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/backend_options.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/device_linear.h"
#include "engine/backend/cuda/device_model.h"
#include "engine/backend/cuda/step_buffers.h"
#include "engine/model/model_description.h"

namespace nibble::backend::cuda {

class MoeBlock {
 public:
  MoeBlock(const CudaMoeOptions& options, const kernels::LayerOptions& layer, LinearRunner& linears,
           cudaStream_t stream);

  // Whether layer `w` of spec routes on the device (and so can run inside a decode graph).
  bool routes_on_device(const DeviceLayer& w, const model::MoeSpec& spec) const;
  // Prepares the device kernels once, before any capture (where some layer routes there).
  static void prepare_device_routing();
  // act.x = act.x2 + experts(act.h) for T rows.
  void run(const DeviceLayer& w, const model::MoeSpec& spec, std::int64_t T, Activations& act,
           int hidden_size);

 private:
  void run_on_host(const DeviceLayer& w, const model::MoeSpec& spec, std::int64_t T,
                   Activations& act, int hidden_size);

  CudaMoeOptions options_;
  kernels::LayerOptions layer_;
  LinearRunner& linears_;
  cudaStream_t stream_;
  PinnedBuffer<float> router_host_;
  PinnedBuffer<std::uint32_t> moe_host_;
  DeviceBuffer<std::uint32_t> moe_device_;
};

}  // namespace nibble::backend::cuda
