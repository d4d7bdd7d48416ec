#pragma once
// test_attention_gpu --bench [N ...]: the flash prefill kernel's throughput on one causal prompt of
// N tokens (default 2,048, 8,192 and 32,768) at Llama-3.1-8B's attention shape (32 query heads, 8
// KV heads, head_dim 128, 16-token cache blocks), in each of its forms (kFlash* options in
// kernels/attention/paged_attention.h) in the same process, against the mma.sync BF16 ceiling
// measured in the same run (tools/kernel-bench/mma_ceiling.h). Each form's output is compared with
// form 0's (the v2 kernel) as a sanity check; correctness against the FP64 reference is the
// test's job. Then the last 2,048-token chunk of the longest prompt (the engine's default chunked
// prefill). Prints one line per (prompt, cache type, form), then per (prompt, cache type) the
// fastest form and its speed-up over the sm_9x v3 default (options 15).

namespace nibble::gpu_test {

int run_flash_bench(int argc, char** argv);

}  // namespace nibble::gpu_test
