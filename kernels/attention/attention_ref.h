#pragma once
// FP64 reference of the paged attention kernels (kernels/attention/paged_attention.h): causal
// grouped-query attention of each sequence's new rows over its cached keys and values, found
// through its block table. Inputs are the values the kernels see (BF16, or FP8 decoded with its
// scales) widened to float.
#include <span>
#include <vector>

namespace nibble::kernels {

struct RefSequence {
  int start = 0;           // position of the first new row
  int count = 0;           // new rows (their keys are already in the cache)
  std::vector<int> table;  // block i holds positions [i * block_size, (i + 1) * block_size)
};

struct RefAttentionShape {
  int q_heads = 0, kv_heads = 0, head_dim = 0, block_size = 0;
};

// gpt-oss's attention features (transformers' GptOssAttention), both off by default.
struct RefAttentionFeatures {
  // [Hq] or empty: head h's logit, in the units of the scaled scores, joins each of its rows'
  // softmax denominators and weighs no value: weights exp(x_j) / (exp(sink) + sum_i exp(x_i)).
  std::span<const float> sinks;
  // > 0: the query at position p sees keys [p - window + 1, p] only (transformers' sliding
  // window: kv_idx > q_idx - sliding_window); 0: [0, p].
  int window = 0;
};

// q: [T, Hq, D], T = the sequences' counts summed, rows in sequence order; k, v: [cache rows,
// Hkv, D]. Returns [T, Hq, D].
std::vector<double> paged_attention_ref(std::span<const float> q, std::span<const float> k,
                                        std::span<const float> v, const RefAttentionShape& shape,
                                        std::span<const RefSequence> sequences, double scale,
                                        const RefAttentionFeatures& features = {});

}  // namespace nibble::kernels
