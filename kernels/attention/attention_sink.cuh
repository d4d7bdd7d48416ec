#pragma once
// The end of a softmax row with an optional attention sink (PagedAttentionArgs::sinks): the sink
// is one more logit in the denominator with no value row, so the row's output is its unnormalised
// value sum times 1 / (den + exp(sink - m)). Shared by every attention kernel and the split merge.
// CUDA only.
#include <cmath>

namespace nibble::kernels::detail {

// The factor that turns a row's unnormalised value sum into its output: `den` is the row's sum of
// exp2(x - m_log2) over its keys (x and m_log2 in log2 units of the scaled scores; m_log2 -inf:
// no key), `sinks` the per-head logits in natural units of the scaled scores (nullptr: none). The
// larger of m_log2 and the sink is the reference, so that a sink far above every score neither
// overflows nor divides by zero.
__device__ __forceinline__ float softmax_row_factor(float den, float m_log2, const float* sinks,
                                                    int head) {
  if (sinks == nullptr) return 1.0f / den;
  const float sink = sinks[head] * 1.4426950408889634f;
  const float top = fmaxf(m_log2, sink);
  const float f = exp2f(m_log2 - top);  // 0 for a row of no key
  return f / fmaf(den, f, exp2f(sink - top));
}

}  // namespace nibble::kernels::detail
