#pragma once
// nibble-kernel-bench --moe: the grouped W4A16 expert GEMMs (kernels/nvfp4/w4a16_grouped.h) and the
// whole device MoE layer (kernels/moe/moe_experts.h) at Qwen3-30B-A3B expert shapes (E = 128,
// k = 8, hidden 2048, moe_intermediate 768), T = 1, 8, 64, 512, 4096 tokens. Each call of a graph
// takes another random routing and alternates between two copies of the experts, so the active
// experts' weights come from DRAM. Bandwidth counts the active experts' NVFP4 bytes (codes and
// scales of gate_up and down, unpadded), against the copy ceiling measured in the same run.
// --moe-gptoss: the same table at gpt-oss-20b's experts (E = 32, k = 4, hidden 2880, intermediate
// 2880) in MXFP4 as shipped, routed top k then softmax, gate_up interleaved with biases and the
// clamped SwiGLU: the layer columns time the fused paths only (the unfused path refuses gpt-oss's
// activation; 0 where the plan does not fuse).
#include <cuda_runtime.h>

#include <cstdint>

namespace nibble::bench {

// The experts a --moe table runs.
struct MoeBenchShape {
  const char* name;
  int experts, k;
  std::int64_t hidden, inter;
  bool gpt_oss = false;  // MXFP4 experts, top k then softmax, biases, clamped SwiGLU
};
inline constexpr MoeBenchShape kQwen3MoeBench{"Qwen3-30B-A3B", 128, 8, 2048, 768};
inline constexpr MoeBenchShape kGptOss20bMoeBench{"gpt-oss-20b MXFP4", 32, 4, 2880, 2880, true};
// Qwen3-Next-80B-A3B's routed experts (its shared expert runs apart) and gpt-oss-120b's.
inline constexpr MoeBenchShape kQwen3NextMoeBench{"Qwen3-Next-80B-A3B", 512, 10, 2048, 512};
inline constexpr MoeBenchShape kGptOss120bMoeBench{"gpt-oss-120b MXFP4", 128, 4, 2880, 2880,
                                                   true};

// Prints one table; copy_gbs: the run's device copy bandwidth (read + write), GB/s.
void bench_moe_grouped(int reps, double copy_gbs, cudaStream_t stream,
                       const MoeBenchShape& shape = kQwen3MoeBench);

}  // namespace nibble::bench
