#include "engine/cli/backend_flags.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "cli/flag_reader.h"

namespace nibble::engine::cli {
namespace {

using backend::BackendOptions;

bool to_bool(const std::string& flag, const std::string& value) {
  if (value == "true" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "no") return false;
  throw std::invalid_argument("--" + flag + " expects true or false, got '" + value + "'");
}

constexpr std::array kFlags = {
    BackendFlag{"device-sampling",
                "true|false: sample on the GPU (default true; false returns logits to the host)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.device_sampling = to_bool(f, v);
                }},
    BackendFlag{"linear-overlap",
                "true|false: programmatic dependent launch of the NVFP4 linears (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.linear_overlap = to_bool(f, v);
                }},
    BackendFlag{"w4a16-dense",
                "true|false: large-batch NVFP4 linears may dequantise then call cuBLAS "
                "(default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.w4a16_dense = to_bool(f, v);
                }},
    BackendFlag{"cuda-step-timing",
                "true|false: log where each step's GPU time goes every 100 steps (default false)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.step_timing = to_bool(f, v);
                }},
    BackendFlag{"moe-routing",
                "device|host: where MoE layers route tokens (default device; host: one "
                "synchronisation a layer, no decode graphs)",
                [](BackendOptions& o, const std::string& flag, const std::string& value) {
                  if (value != "device" && value != "host")
                    throw std::invalid_argument("--" + flag + " must be device or host, got '" +
                                                value + "'");
                  o.cuda.moe.host_routing = value == "host";
                }},
    BackendFlag{"moe-fusions",
                "true|false: the MoE decode fusions of routing, experts and combine (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.moe.fused = to_bool(f, v);
                }},
    BackendFlag{"moe-fused-router",
                "true|false: a BF16 router inside the MoE route launch (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.moe.fused_router = to_bool(f, v);
                }},
    BackendFlag{"moe-route-in-gemm",
                "true|false: one token routed inside the expert GEMMs (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.moe.route_in_gemm = to_bool(f, v);
                }},
    BackendFlag{"moe-one-launch",
                "true|false: gate_up and down experts in one launch where they fit (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.moe.one_launch = to_bool(f, v);
                }},
    BackendFlag{"moe-overlap",
                "true|false: the fused MoE launches as dependent launches (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.moe.overlap = to_bool(f, v);
                }},
    BackendFlag{"w4a16-wgmma",
                "true|false: warpgroup-MMA tiles for large NVFP4 linears on sm_90a (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.linear.wgmma = to_bool(f, v);
                }},
    BackendFlag{"w4a16-wgmma-cluster-sum",
                "true|false: sum wgmma K splits in a cluster, not the workspace (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.linear.wgmma_cluster_sum = to_bool(f, v);
                }},
    BackendFlag{"slice-short-k",
                "true|false: one-wave decode slices may cover the SMs unevenly (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.linear.slice_short_k = to_bool(f, v);
                }},
    BackendFlag{"flash-attention",
                "true|false: prefill chunks on the flash kernel (default true; false: FP32 tiles)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.attention.flash = to_bool(f, v);
                }},
    BackendFlag{"flash-decode",
                "true|false: decode steps the decode kernel does not take on the flash kernel "
                "(default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.attention.flash_decode = to_bool(f, v);
                }},
    BackendFlag{"decode-attention",
                "true|false: steps of decodes on the decode attention kernel (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.attention.decode_attention = to_bool(f, v);
                }},
    BackendFlag{"decode-attention-overlap",
                "true|false: the decode attention kernel as a dependent launch (default true)",
                [](BackendOptions& o, const std::string& f, const std::string& v) {
                  o.cuda.attention.decode_overlap = to_bool(f, v);
                }},
    BackendFlag{
        "small-kernel-overlap",
        "true|false: norm, RoPE and SwiGLU launches at decode as dependent launches (default true)",
        [](BackendOptions& o, const std::string& f, const std::string& v) {
          o.cuda.layer.small_overlap = to_bool(f, v);
        }},
    BackendFlag{
        "decode-attention-blocks-per-sm",
        "1..8: the decode attention split rule's blocks a multiprocessor (default: its own)",
        [](BackendOptions& o, const std::string& f, const std::string& v) {
          const auto n = nibble::cli::parse_integer(v, 1, 8);
          if (!n)
            throw std::invalid_argument("--" + f + " expects an integer in [1, 8], got '" + v +
                                        "'");
          o.cuda.attention.decode_blocks_per_sm = int(*n);
        }},
};

}  // namespace

std::span<const BackendFlag> backend_flags() {
  return kFlags;
}

const BackendFlag* find_backend_flag(std::string_view name) {
  for (const BackendFlag& f : kFlags)
    if (f.name == name) return &f;
  return nullptr;
}

std::string backend_flags_usage() {
  std::string out;
  for (const BackendFlag& f : kFlags) {
    std::string line = "  --" + std::string(f.name) + " V";
    line.resize(std::max<std::size_t>(line.size() + 1, 35), ' ');
    out += line + std::string(f.help) + "\n";
  }
  return out;
}

}  // namespace nibble::engine::cli
