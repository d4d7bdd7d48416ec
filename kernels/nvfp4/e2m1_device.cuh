#pragma once
// Float -> E2M1 and FP8 E4M3 on the device, bit-identical to the CPU reference
// (nvfp4_ref.h: round to nearest even, saturate at +-6, NaN -> +6, sign of zero kept).
// The software path runs on every GPU; sm_100a/sm_120a use the hardware cvt for finite
// inputs (sm_121a lacks cvt.rn.satfinite.e2m1x2.f32, so it takes the software path).
#include <cuda_fp8.h>

#include <cstdint>

namespace nibble::kernels {

// Compare chain over the midpoints 0.25 0.75 1.25 1.75 2.5 3.5 5 of {0,.5,1,1.5,2,3,4,6}:
// '>' where the tie goes to the lower (even) code, '>=' where it goes to the upper one.
__host__ __device__ inline std::uint8_t e2m1_from_float_soft(float x) {
  if (x != x) return 0x7;  // NaN: +6, as the reference
  const float a = fabsf(x);
  const int code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                   (a >= 3.5f) + (a > 5.0f);
  return std::uint8_t(code | (signbit(x) ? 0x8 : 0x0));
}

#if defined(__CUDA_ARCH__) && \
    (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM120_ALL))
#define NIBBLE_HAVE_CVT_E2M1 1
#endif

// Two values into one byte: lo in the low nibble (element 2i), hi in the high nibble.
__device__ inline std::uint8_t e2m1x2_from_floats(float lo, float hi) {
#if defined(NIBBLE_HAVE_CVT_E2M1)
  std::uint16_t packed;
  // cvt puts its first source in the upper nibble.
  asm("{\n .reg .b8 t;\n cvt.rn.satfinite.e2m1x2.f32 t, %1, %2;\n cvt.u16.u8 %0, t;\n}"
      : "=h"(packed)
      : "f"(hi), "f"(lo));
  std::uint8_t byte = std::uint8_t(packed);
  // NaN has no E2M1 code; the reference maps it to +6 whatever its sign.
  if (lo != lo) byte = std::uint8_t((byte & 0xF0) | 0x7);
  if (hi != hi) byte = std::uint8_t((byte & 0x0F) | 0x70);
  return byte;
#else
  return std::uint8_t(e2m1_from_float_soft(lo) | (e2m1_from_float_soft(hi) << 4));
#endif
}

// E4M3 (float8_e4m3fn): round to nearest even, saturate finite and Inf to +-448, NaN -> 0x7F.
__device__ inline std::uint8_t e4m3_from_float(float x) {
  if (x != x) return 0x7F;
  return std::uint8_t(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

__device__ inline float e4m3_to_float_bits(std::uint8_t code) {
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7) return __int_as_float(0x7fc00000);
  if (exponent == 0) {
    magnitude = float(mantissa) * (1.0f / 512.0f);  // subnormal: m/8 * 2^-6
  } else {
    magnitude = __int_as_float(((exponent - 7 + 127) << 23) | (mantissa << 20));
  }
  return (code & 0x80) ? -magnitude : magnitude;
}

}  // namespace nibble::kernels
