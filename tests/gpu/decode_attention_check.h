#pragma once
// The decode attention kernel (kernels/attention/decode_attention.h) through paged_attention()
// against the FP64 reference (kernels/attention/attention_ref.h) on fresh random queries and
// caches with shuffled block tables: head_dim 64/128/256, 1 to 8 query heads per KV head (16: the
// fallback path), contexts of 1 to 40,000 keys (on and off the 16- and 32-key steps), batches of 1
// to 64 sequences of mixed lengths, BF16 and FP8 caches, cache blocks of 16 (shift) and 12
// (division) tokens, and split counts from the engine's rule, none, and forced counts as a decode
// graph replays them (above what the keys need, beyond a cluster with and without workspace).
// gpt-oss's sinks and sliding windows (cut on and inside cache blocks, of one key, past the
// context) on its shape (64 query heads, 8 KV heads, head_dim 64) and at head_dim 128.
// Bound: relative L2 < 5e-3 (BF16 operands, METHOD.md's 1e-3..1e-2); outputs poisoned with NaN
// before every run. One result line per case (its worst run).
#include <random>

#include "tests/gpu/gpu_check_support.h"

namespace nibble::gpu_test {

void run_decode_attention_checks(std::mt19937_64& rng, Results& results);

}  // namespace nibble::gpu_test
