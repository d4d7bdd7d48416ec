#pragma once
// NVFP4 on the CPU: the reference every kernel and loader is checked against.
// Format (docs/models.md, "NVFP4 checkpoints"):
//   E2M1 4-bit values {0, .5, 1, 1.5, 2, 3, 4, 6} with a sign bit (0x8), two per byte along K,
//   element 2i in the low nibble; one FP8 E4M3 block scale per 16 elements along K;
//   one FP32 global factor per tensor (multiply form: value = e2m1 * e4m3 * global).
// Written to be obviously correct rather than fast.
#include <cstdint>
#include <span>
#include <vector>

namespace nibble::nvfp4 {

inline constexpr int kBlockSize = 16;  // elements per E4M3 block scale
inline constexpr float kE2M1Max = 6.0f;
inline constexpr float kE4M3Max = 448.0f;

// --- E2M1 -----------------------------------------------------------------------------
float e2m1_to_float(std::uint8_t code);  // low 4 bits used
// Round to nearest E2M1, ties to the even code; |x| > 6 and +-Inf saturate to +-6;
// NaN becomes +6 (E2M1 has no NaN). The sign of zero is kept (-0.1 -> 0x8).
std::uint8_t float_to_e2m1(float x);

// --- FP8 E4M3 (float8_e4m3fn: bias 7, no Inf, NaN = S.1111.111, max 448) ---------------
float e4m3_to_float(std::uint8_t code);
// Round to nearest, ties to even; finite values beyond 448 and +-Inf saturate to +-448;
// NaN stays NaN (0x7F).
std::uint8_t float_to_e4m3(float x);

// --- Tensors ---------------------------------------------------------------------------
// Global factor in the multiply form for a tensor whose largest magnitude is amax:
// amax / (6 * 448), so the largest block scale lands on E4M3's maximum. 1 for amax == 0.
float global_factor_for_amax(float amax);

// A row-major [rows, cols] matrix quantized along cols (the reduction dimension K).
struct QuantizedMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;             // multiple of kBlockSize
  std::vector<std::uint8_t> packed;  // [rows, cols / 2], E2M1 pairs
  std::vector<std::uint8_t> scales;  // [rows, cols / 16], E4M3 codes
  float global_factor = 1.0f;        // multiply form
};

// Quantizes one row of k values (k % 16 == 0) with the given global factor.
void quantize_row(std::span<const float> x, float global_factor, std::span<std::uint8_t> packed,
                  std::span<std::uint8_t> scales);
void dequantize_row(std::span<const std::uint8_t> packed, std::span<const std::uint8_t> scales,
                    float global_factor, std::span<float> out);

// Throws std::invalid_argument if cols is not a positive multiple of 16 or sizes disagree.
QuantizedMatrix quantize_matrix(std::span<const float> values, std::int64_t rows,
                                std::int64_t cols);
// With a given global factor (multiply form) instead of one from the values' amax: matrices that
// an engine fuses (q/k/v, gate/up) share one, as ModelOpt exports them.
QuantizedMatrix quantize_matrix(std::span<const float> values, std::int64_t rows, std::int64_t cols,
                                float global_factor);
std::vector<float> dequantize_matrix(const QuantizedMatrix& q);

// Element (r, c) of a quantized matrix, decoded: e2m1 * e4m3 * global.
float dequantize_element(const QuantizedMatrix& q, std::int64_t r, std::int64_t c);

}  // namespace nibble::nvfp4
