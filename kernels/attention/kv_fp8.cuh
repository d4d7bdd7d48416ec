#pragma once
// The FP8 KV cache format on the device (its definition and host reference:
// kernels/attention/kv_fp8_ref.h, whose kv_fp8_scale both sides call): E4M3 codes per
// (token, KV head) row with one BF16 scale.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/attention/kv_fp8_format.h"

namespace nibble::kernels {

__device__ __forceinline__ std::uint8_t kv_fp8_code(float x, float inv_scale) {
  return std::uint8_t(__nv_cvt_float_to_fp8(x * inv_scale, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float bf16_bits_to_float(std::uint16_t bits) {
  return __uint_as_float(std::uint32_t(bits) << 16);
}

// Two E4M3 codes (the low byte first) to floats; exact (E4M3 values are all FP16 values).
__device__ __forceinline__ float2 fp8x2_to_float2(std::uint16_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(pair), __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

}  // namespace nibble::kernels
