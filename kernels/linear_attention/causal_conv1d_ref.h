#pragma once
// CPU reference of the causal depthwise conv1d that Gated DeltaNet runs over q, k and v before the
// delta rule (Qwen3-Next: kernel 4, no bias, SiLU; transformers' torch_causal_conv1d_fn and
// torch_causal_conv1d_update). Channel c of token t:
//   out[t, c] = silu(sum_{i < K} w[c, i] x[t - (K - 1) + i, c])
// where inputs before the sequence's first token are zeros and inputs before this call's first
// token come from `state`. Prefill and the one-token decode update are the same function: a
// prompt split into calls at any token equals one call.
#include <cstdint>
#include <span>

namespace nibble::kernels {

// x, out [T, channels]; weight [channels, kernel]; state [kernel - 1, channels]: the kernel - 1
// inputs before x[0], oldest first (zeros for a new sequence), replaced by the last kernel - 1
// inputs seen. silu false: the plain convolution.
void causal_conv1d_ref(std::int64_t tokens, int channels, int kernel, std::span<const float> x,
                       std::span<const float> weight, std::span<float> state, std::span<float> out,
                       bool silu = true);

}  // namespace nibble::kernels
