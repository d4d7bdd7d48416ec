#pragma once
// CPU model of the decode attention kernel's decomposition (kernels/attention/decode_attention.h),
// in FP64: the keys of each (sequence, KV head) cut into the kernel's splits
// (decode_attention_plan.h), each split's chunks dealt to its warps, each warp an online softmax
// over 16-key steps with its maximum in exp2 units, the warps merged per block, the blocks of each
// cluster merged, and the clusters' partials merged as paged_attention's merge kernel does (in
// natural units), the sinks joining last as partials with no value (attention_ref.h's features;
// a sliding window's keys split as the whole context's would be). It equals paged_attention_ref
// (attention_ref.h) up to rounding exactly when the partition covers every key once and every merge
// is right, for any split count: what the GPU kernel relies on, checked here without a GPU.
#include <span>
#include <vector>

#include "kernels/attention/attention_ref.h"

namespace nibble::kernels {

// Decodes only (every sequence's count is 1); `splits` a power of two. Same arguments and result
// as paged_attention_ref.
std::vector<double> decode_attention_model(std::span<const float> q, std::span<const float> k,
                                           std::span<const float> v, const RefAttentionShape& shape,
                                           std::span<const RefSequence> sequences, double scale,
                                           int splits, const RefAttentionFeatures& features = {});

}  // namespace nibble::kernels
