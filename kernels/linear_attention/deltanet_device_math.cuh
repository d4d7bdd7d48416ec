#pragma once
// Device helpers both Gated DeltaNet forms use (gated_deltanet.cu, the recurrent one, and
// gated_deltanet_chunked.cu): BF16 loads and stores, SiLU, a warp's sum. Included by .cu files
// only.
#include <cuda_bf16.h>

#include <cstdint>

namespace nibble::kernels::deltanet {

__device__ __forceinline__ float bf16_at(const std::uint16_t* p, std::int64_t i) {
  return __bfloat162float(__ushort_as_bfloat16(p[i]));
}

__device__ __forceinline__ std::uint16_t to_bf16(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

__device__ __forceinline__ float silu(float x) {
  return x / (1.0f + __expf(-x));
}

// Sum over a warp, every lane gets it.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// Warps 0 and 1 (threads 0..63) write norms[0] = q's inverse L2 norm times 1 / sqrt(DK) (the
// attention scale folded in) and norms[1] = k's, from q and k at qkv[0, DK) and [DK, 2 DK).
template <int DK>
__device__ __forceinline__ void qk_inverse_norms(const float* qkv, float* norms, int tid) {
  if (tid >= 64) return;
  const float* x = qkv + (tid < 32 ? 0 : DK);
  float sum = 0.0f;
  for (int i = tid % 32; i < DK; i += 32) sum = fmaf(x[i], x[i], sum);
  sum = warp_sum(sum);
  if (tid % 32 == 0) norms[tid / 32] = rsqrtf(sum + 1e-6f) * (tid < 32 ? rsqrtf(float(DK)) : 1.0f);
}

// A value head's gates from its a and b inputs: the decay g = -exp(A_log) softplus(a + dt_bias)
// and beta = sigmoid(b).
__device__ __forceinline__ void gates_of(float a, float b, float A_log, float dt_bias, float& g,
                                         float& beta) {
  const float x = a + dt_bias;
  const float softplus = x > 20.0f ? x : log1pf(expf(x));
  g = -expf(A_log) * softplus;
  beta = 1.0f / (1.0f + expf(-b));
}

}  // namespace nibble::kernels::deltanet
