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

}  // namespace nibble::kernels::deltanet
