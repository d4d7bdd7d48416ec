#pragma once
// CPU reference of the gated delta rule, the recurrence of Gated DeltaNet linear attention
// (Qwen3-Next's `linear_attention` layers; transformers' torch_recurrent_gated_delta_rule and
// torch_chunk_gated_delta_rule define it). Per value head h with state S [k_dim, v_dim], token t:
//   S  <- exp(g_t) S
//   u  =  beta_t (v_t - S^T k_t)
//   S  <- S + k_t u^T
//   o_t = S^T q_t
// with q and k L2-normalised (x / sqrt(sum x^2 + 1e-6)) and q scaled by 1 / sqrt(k_dim). Key heads
// may be fewer than value heads: value head h reads key head h / (v_heads / k_heads) (the
// repeat_interleave of the reference).
//
// Two forms of the same function: the recurrent one (decode; one token at a time) and the chunked
// one (prefill; the WY form that the tensor-core kernel computes: within a chunk the u's solve a
// unit lower-triangular system, and the state passes between chunks). Both accumulate in double;
// their outputs and final states agree to rounding, which tests/kernels/test_gated_delta_ref.cpp
// checks.
#include <cstdint>
#include <span>

#include "kernels/linear_attention/gated_deltanet_shape.h"

namespace nibble::kernels {

// One sequence's tokens, row-major: q, k [T, k_heads, k_dim]; v [T, v_heads, v_dim]; g (the log
// decay, <= 0) and beta [T, v_heads]. state [v_heads, k_dim, v_dim]: the state before the first
// token on entry, after the last on return (zeros for a new sequence). out [T, v_heads, v_dim].
struct GatedDeltaInputs {
  std::span<const float> q, k, v, g, beta;
};

void gated_delta_recurrent_ref(const GatedDeltaShape& shape, std::int64_t tokens,
                               const GatedDeltaInputs& in, std::span<float> state,
                               std::span<float> out);

// chunk_size >= 1 (the kernels use 64). The same results as the recurrent form.
void gated_delta_chunked_ref(const GatedDeltaShape& shape, std::int64_t tokens,
                             const GatedDeltaInputs& in, std::span<float> state,
                             std::span<float> out, int chunk_size = 64);

// The gates from the projections: beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), per
// token and value head. a, b [T, v_heads]; A_log, dt_bias [v_heads]; g, beta [T, v_heads].
void gated_delta_gates_ref(std::int64_t tokens, int v_heads, std::span<const float> a,
                           std::span<const float> b, std::span<const float> A_log,
                           std::span<const float> dt_bias, std::span<float> g,
                           std::span<float> beta);

}  // namespace nibble::kernels
