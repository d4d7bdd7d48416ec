#pragma once
// nibble-kernel-bench --moe: the grouped W4A16 expert GEMMs (kernels/nvfp4/w4a16_grouped.h) and the
// whole device MoE layer (kernels/moe/moe_experts.h) at Qwen3-30B-A3B expert shapes (E = 128,
// k = 8, hidden 2048, moe_intermediate 768), T = 1, 8, 64, 512, 4096 tokens. Each call of a graph
// takes another random routing and alternates between two copies of the experts, so the active
// experts' weights come from DRAM. Bandwidth counts the active experts' NVFP4 bytes (codes and
// scales of gate_up and down, unpadded), against the copy ceiling measured in the same run.
#include <cuda_runtime.h>

namespace nibble::bench {

// Prints one table; copy_gbs: the run's device copy bandwidth (read + write), GB/s.
void bench_moe_grouped(int reps, double copy_gbs, cudaStream_t stream);

}  // namespace nibble::bench
