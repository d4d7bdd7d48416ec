#pragma once
// The rotary embedding of one rotate-half pair (lo = element i, hi = element i + D/2 of a head),
// shared by rope_and_store_kv (layer_ops.cu) and the qkv slice kernel's RoPE epilogue
// (kernels/nvfp4/w4a16_slice.cu), so that both compute the same bits: the angle position *
// inv_freq[i] in FP64, reduced to [0, 2 pi) before the FP32 sine (positions reach 10^5 and more),
// as cpu::apply_rope does, cosine and sine times `scale` (YaRN's attention factor, 1 otherwise, as
// cpu::apply_rope's scale). Returns {rotated lo, rotated hi}.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace nibble::kernels {

__device__ inline float2 rope_rotate(float lo, float hi, std::int32_t position, double inv_freq,
                                     float scale = 1.0f) {
  constexpr double kTwoPi = 6.283185307179586;
  double angle = double(position) * inv_freq;
  angle -= floor(angle / kTwoPi) * kTwoPi;
  float s, c;
  sincosf(float(angle), &s, &c);
  s *= scale;
  c *= scale;
  return make_float2(lo * c - hi * s, hi * c + lo * s);
}

}  // namespace nibble::kernels
