#pragma once
// test_attention_gpu --decode-bench: a step of decodes' attention, one layer's call timed inside a
// CUDA graph of back-to-back calls (as the engine's decode graphs run it), for Llama-3.1-8B (32
// query / 8 KV heads) and Qwen3-30B-A3B (32 / 4), head_dim 128, and gpt-oss's full and sliding
// (window 128) layers (64 / 8, head_dim 64, sinks; % of copy for the window's bytes) at 66 / 512 /
// 4,096 / 32,768 keys,
// batch 1 and 8, BF16 and FP8 caches: today's flash kernel, the CUDA-core decode kernel and the
// decode attention kernel in the same process, each with the engine's split rule, as us a layer
// and the K/V bytes' rate as % of the device-to-device copy rate measured in the same run. The
// calls rotate over enough copies of the cache that a layer's K/V come from memory, not L2. The
// new kernel also runs at half and twice its rule's split count (how flat the rule's choice is),
// and its output is checked against the flash kernel's (relative L2 < 1e-2).

namespace nibble::gpu_test {

int run_decode_bench(int argc, char** argv);

}  // namespace nibble::gpu_test
