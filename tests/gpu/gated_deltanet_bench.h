#pragma once
// test_gated_deltanet_gpu --bench: Qwen3-Next-80B's linear-attention layer (16/32 heads of
// 128 x 128, conv 4) on the device, with the copy rate and cuBLAS's BF16 GEMM rate measured in
// the same run as ceilings.
// - Decode steps of 1, 4, 8 and 32 rows: 36 layers in one CUDA graph, µs a layer and the bytes it
//   must move (state and conv window read and written, conv weights, inputs, outputs) as % of copy.
// - Prompts of 8 to 8,192 tokens in one row: the recurrent and the chunked forms' µs a layer and
//   their ratio (where kGatedDeltaChunkedMinTokens belongs), the chunked form's % of copy for its
//   compulsory bytes and % of cuBLAS BF16 for its matmul FLOPs.

namespace nibble::gpu_test {

void run_gated_deltanet_bench();

}  // namespace nibble::gpu_test
