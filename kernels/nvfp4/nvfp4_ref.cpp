#include "kernels/nvfp4/nvfp4_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace nibble::nvfp4 {
namespace {

constexpr float kE2M1Magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Index of the nearest entry of an ascending table; on a tie the even index wins.
// Both E2M1 and E4M3 magnitudes are ascending in their code, so "even index" is
// "even code", which is what round-to-nearest-even means for these formats.
template <typename Table>
int nearest_even_index(const Table& table, int size, float magnitude) {
  // Binary search for the first entry >= magnitude, then pick between it and its neighbour.
  int lo = 0, hi = size - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (table[mid] < magnitude)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return 0;
  const float d_below = magnitude - table[lo - 1];
  const float d_above = table[lo] - magnitude;
  if (d_below < d_above) return lo - 1;
  if (d_above < d_below) return lo;
  return (lo % 2 == 0) ? lo : lo - 1;
}

// Magnitudes of the 127 finite non-negative E4M3 codes 0x00..0x7E, ascending.
struct E4M3Table {
  float value[127];
  E4M3Table() {
    for (int c = 0; c < 127; ++c) value[c] = e4m3_to_float(std::uint8_t(c));
  }
  float operator[](int i) const { return value[i]; }
};

const E4M3Table& e4m3_table() {
  static const E4M3Table table;
  return table;
}

}  // namespace

float e2m1_to_float(std::uint8_t code) {
  const float magnitude = kE2M1Magnitudes[code & 0x7];
  return (code & 0x8) ? -magnitude : magnitude;
}

// The nearest E2M1 magnitude, ties to the even code, as nearest_even_index would pick it: the
// code counts the midpoints between neighbouring magnitudes that the value passes, a tie passing
// the midpoint only when the code above it is the even one. (Neighbouring magnitudes are within a
// factor of two, so nearest_even_index's differences are exact and agree with these compares.)
// Branch-free: quantizing random weights for a 30B-parameter checkpoint calls it 3e10 times.
std::uint8_t float_to_e2m1(float x) {
  if (std::isnan(x)) return 0x7;
  const std::uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float m = std::min(std::fabs(x), kE2M1Max);
  const int code = int(m > 0.25f) + int(m >= 0.75f) + int(m > 1.25f) + int(m >= 1.75f) +
                   int(m > 2.5f) + int(m >= 3.5f) + int(m > 5.0f);
  return sign | std::uint8_t(code);
}

float e4m3_to_float(std::uint8_t code) {
  const int sign = code & 0x80;
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = exponent == 0 ? std::ldexp(float(mantissa) / 8.0f, -6)  // subnormal
                                        : std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
  return sign ? -magnitude : magnitude;
}

std::uint8_t float_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float magnitude = std::min(std::fabs(x), kE4M3Max);
  return sign | std::uint8_t(nearest_even_index(e4m3_table(), 127, magnitude));
}

float global_factor_for_amax(float amax) {
  return amax > 0.0f ? amax / (kE2M1Max * kE4M3Max) : 1.0f;
}

void quantize_row(std::span<const float> x, float global_factor, std::span<std::uint8_t> packed,
                  std::span<std::uint8_t> scales) {
  const std::size_t k = x.size();
  if (k % kBlockSize != 0 || packed.size() != k / 2 || scales.size() != k / kBlockSize) {
    throw std::invalid_argument("nvfp4 quantize_row: k=" + std::to_string(k) +
                                " must be a multiple of 16 with k/2 packed bytes and k/16 scales");
  }
  for (std::size_t b = 0; b < k / kBlockSize; ++b) {
    const float* block = x.data() + b * kBlockSize;
    float amax = 0.0f;
    for (int i = 0; i < kBlockSize; ++i) amax = std::max(amax, std::fabs(block[i]));
    const std::uint8_t scale_code = float_to_e4m3(amax / kE2M1Max / global_factor);
    scales[b] = scale_code;
    const float step = e4m3_to_float(scale_code) * global_factor;
    for (int i = 0; i < kBlockSize; i += 2) {
      // A zero block scale means every element of the block is zero.
      const std::uint8_t lo = step > 0.0f ? float_to_e2m1(block[i] / step) : 0;
      const std::uint8_t hi = step > 0.0f ? float_to_e2m1(block[i + 1] / step) : 0;
      packed[b * kBlockSize / 2 + i / 2] = std::uint8_t(lo | (hi << 4));
    }
  }
}

void dequantize_row(std::span<const std::uint8_t> packed, std::span<const std::uint8_t> scales,
                    float global_factor, std::span<float> out) {
  const std::size_t k = out.size();
  if (packed.size() != k / 2 || scales.size() != k / kBlockSize) {
    throw std::invalid_argument("nvfp4 dequantize_row: sizes do not match k=" + std::to_string(k));
  }
  for (std::size_t i = 0; i < k; ++i) {
    const std::uint8_t byte = packed[i / 2];
    const std::uint8_t code = (i % 2 == 0) ? (byte & 0xF) : (byte >> 4);
    out[i] = e2m1_to_float(code) * e4m3_to_float(scales[i / kBlockSize]) * global_factor;
  }
}

QuantizedMatrix quantize_matrix(std::span<const float> values, std::int64_t rows,
                                std::int64_t cols) {
  float amax = 0.0f;
  for (float v : values) amax = std::max(amax, std::fabs(v));
  return quantize_matrix(values, rows, cols, global_factor_for_amax(amax));
}

QuantizedMatrix quantize_matrix(std::span<const float> values, std::int64_t rows, std::int64_t cols,
                                float global_factor) {
  if (rows <= 0 || cols <= 0 || cols % kBlockSize != 0 ||
      values.size() != std::size_t(rows * cols)) {
    throw std::invalid_argument("nvfp4 quantize_matrix: shape [" + std::to_string(rows) + ", " +
                                std::to_string(cols) +
                                "] needs cols a positive multiple of 16 and rows*cols values");
  }
  QuantizedMatrix q;
  q.rows = rows;
  q.cols = cols;
  q.packed.resize(std::size_t(rows * cols / 2));
  q.scales.resize(std::size_t(rows * cols / kBlockSize));
  q.global_factor = global_factor;
  for (std::int64_t r = 0; r < rows; ++r) {
    quantize_row(values.subspan(std::size_t(r * cols), std::size_t(cols)), q.global_factor,
                 std::span(q.packed).subspan(std::size_t(r * cols / 2), std::size_t(cols / 2)),
                 std::span(q.scales).subspan(std::size_t(r * cols / kBlockSize),
                                             std::size_t(cols / kBlockSize)));
  }
  return q;
}

std::vector<float> dequantize_matrix(const QuantizedMatrix& q) {
  std::vector<float> out(std::size_t(q.rows * q.cols));
  for (std::int64_t r = 0; r < q.rows; ++r) {
    dequantize_row(
        std::span(q.packed).subspan(std::size_t(r * q.cols / 2), std::size_t(q.cols / 2)),
        std::span(q.scales).subspan(std::size_t(r * q.cols / kBlockSize),
                                    std::size_t(q.cols / kBlockSize)),
        q.global_factor, std::span(out).subspan(std::size_t(r * q.cols), std::size_t(q.cols)));
  }
  return out;
}

float dequantize_element(const QuantizedMatrix& q, std::int64_t r, std::int64_t c) {
  const std::uint8_t byte = q.packed[std::size_t(r * q.cols / 2 + c / 2)];
  const std::uint8_t code = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
  return e2m1_to_float(code) *
         e4m3_to_float(q.scales[std::size_t(r * q.cols / kBlockSize + c / kBlockSize)]) *
         q.global_factor;
}

}  // namespace nibble::nvfp4
