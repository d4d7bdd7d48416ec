#pragma once
// How the backends run: one struct, filled once by the command line (engine/cli/backend_flags.h:
// flags, or keys of serve's --config YAML) and passed down explicitly to the backend that takes
// it. Nothing below engine/cli reads the environment. Every default is the production form; the
// other values are fallbacks and the A/B switches measurements were made with (docs/
// performance.md and the kernel families' PERF_NOTES.md name the measurement behind each default).
#include <string>

#include "kernels/kernel_options.h"

namespace nibble::backend {

// The MoE layers' decode forms on the GPU (kernels/moe/moe_experts.h). Each on-switch picks the
// form that won its A/B; off reaches the form it replaced, for measuring or ruling it out.
struct CudaMoeOptions {
  bool host_routing = false;  // route through the host (one sync a layer): the fallback form
  bool fused = true;          // the decode fusions of routing, experts and combine
  bool fused_router = true;   // a BF16 router inside the route launch (<= 8 tokens)
  bool route_in_gemm = true;  // one token routed inside the expert GEMMs
  bool one_launch = true;     // gate_up and down in one launch where the device holds its blocks
  bool overlap = true;        // the fused launches go out as programmatic dependent launches
};

struct CudaOptions {
  bool graphs = true;           // decode steps replay CUDA graphs (off: --enforce-eager)
  bool device_sampling = true;  // sampling on the device (off: logits to the host)
  bool linear_overlap = true;   // programmatic dependent launch of the NVFP4 linears
  bool w4a16_dense = true;      // large-M NVFP4 linears may dequantise then call cuBLAS
  bool step_timing = false;     // log where each step's GPU time goes, every 100 steps
  // Linear-attention rows (Qwen3-Next) of at least this many tokens take the chunked delta rule,
  // shorter ones the recurrent form; 0: the kernels' choice (kGatedDeltaChunkedMinTokens). Tests
  // pin one form (1: all chunked; INT_MAX: all recurrent) to compare paths of the same rounding.
  int deltanet_chunked_min_tokens = 0;
  CudaMoeOptions moe;
  kernels::LinearOptions linear;        // the NVFP4 linears' tiles (kernels/nvfp4_linear.h)
  kernels::AttentionOptions attention;  // which attention kernels run (paged_attention.h)
  kernels::LayerOptions layer;          // the norm, RoPE and SwiGLU launches (layer_ops.h)
};

struct BackendOptions {
  std::string device = "auto";  // auto | cpu | cuda (select_backend.h)
  int cpu_threads = 0;          // CPU backend threads, 0: one per hardware thread
  CudaOptions cuda;
};

}  // namespace nibble::backend
