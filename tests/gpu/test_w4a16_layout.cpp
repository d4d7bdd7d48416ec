// CPU checks of the W4A16 repacked weight layout (kernels/nvfp4/w4a16_layout.h): the repack writes
// the element-by-element reference's bytes, every element decodes to the reference
// dequantization, padding is zero, bad inputs are refused.
// Needs no GPU (ctest label unit). Plain main: the same source builds on the device image.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"
#include "kernels/nvfp4/w4a16_layout.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  failures += !ok;
}

void check_shape(std::mt19937_64& rng, std::int64_t n, std::int64_t k, bool k_major) {
  std::vector<float> values(std::size_t(n * k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : values) v = normal(rng);
  // A zero block (row 0, block 0): its scale is zero, its codes must decode to zero.
  for (int i = 0; i < 16; ++i) values[std::size_t(i)] = 0.0f;
  auto q = nibble::nvfp4::quantize_matrix(values, n, k);
  q.packed[0] = 0x3B;  // garbage codes in the zero block, as a careless exporter may leave
  // Negative scales (legal E4M3, unusual in checkpoints) and a negative zero: the repack moves
  // the sign into the codes.
  for (std::size_t i = 1; i < q.scales.size(); i += 3) q.scales[i] |= 0x80;
  // A negative-zero scale over garbage codes: the codes become sign bits only.
  if (q.scales.size() > 1) q.scales[1] = 0x80, q.packed[8] = 0xA5;
  const auto w =
      nibble::nvfp4::repack_for_w4a16(q.packed, q.scales, n, k, q.global_factor, k_major);
  // The fast repack writes exactly the bytes of the element-by-element definition.
  const auto ref =
      nibble::nvfp4::repack_for_w4a16_reference(q.packed, q.scales, n, k, q.global_factor, k_major);
  expect(w.tiles == ref.tiles && w.scales == ref.scales,
         std::string(k_major ? "k-major" : "group-major") + " repack [" + std::to_string(n) + ", " +
             std::to_string(k) + "]: the reference's bytes");
  std::int64_t bad = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < k; ++c) {
      bad += nibble::nvfp4::w4a16_element(w, r, c) != nibble::nvfp4::dequantize_element(q, r, c);
    }
  }
  // Padding rows and columns decode to zero.
  std::int64_t pad_bad = 0;
  for (std::int64_t r = 0; r < w.n_padded; ++r) {
    for (std::int64_t c = (r < n ? k : 0); c < w.k_padded; ++c) {
      pad_bad += nibble::nvfp4::w4a16_element(w, r, c) != 0.0f;
    }
  }
  // The dequantising kernel's reference: BF16 of e2m1 * e4m3, exact, times the global factor is
  // the reference element; rows from a 128-row group boundary on, clipped at n.
  std::int64_t dense_bad = 0;
  const std::int64_t row_begin = n > 128 ? 128 : 0;
  const auto dense = nibble::nvfp4::w4a16_dequantize_rows(w, row_begin, 256);
  const std::int64_t dense_rows = std::min<std::int64_t>(256, n - row_begin);
  dense_bad += std::int64_t(dense.size()) != dense_rows * k;
  for (std::int64_t r = 0; r < dense_rows && !dense_bad; ++r) {
    for (std::int64_t c = 0; c < k; ++c) {
      const float v = nibble::nvfp4::bf16_to_float(dense[std::size_t(r * k + c)]);
      dense_bad += v * w.global_factor != nibble::nvfp4::dequantize_element(q, row_begin + r, c);
    }
  }
  expect(dense_bad == 0, std::string(k_major ? "k-major" : "group-major") + " dense rows [" +
                             std::to_string(n) + ", " + std::to_string(k) + "] from row " +
                             std::to_string(row_begin) + ": " + std::to_string(dense_bad) +
                             " mismatches");
  expect(bad == 0 && pad_bad == 0 && w.n_padded % 128 == 0 && w.k_padded % 64 == 0 &&
             std::int64_t(w.tiles.size()) == w.n_padded * w.k_padded / 2 &&
             std::int64_t(w.scales.size()) == w.n_padded * w.k_padded / 16,
         std::string(k_major ? "k-major" : "group-major") + " layout [" + std::to_string(n) + ", " +
             std::to_string(k) + "]: " + std::to_string(bad) + " element and " +
             std::to_string(pad_bad) + " padding mismatches");
}

// The OCP MX v1.0 definition of one MXFP4 element: e2m1 * 2^(e - 127), e = 255 NaN; element 2i
// of a row in the low nibble of byte i.
float ocp_mxfp4(const std::vector<std::uint8_t>& packed, const std::vector<std::uint8_t>& e8m0,
                std::int64_t k, std::int64_t r, std::int64_t c) {
  const std::uint8_t byte = packed[std::size_t(r * (k / 2) + c / 2)];
  const std::uint8_t e = e8m0[std::size_t(r * (k / 32) + c / 32)];
  if (e == 0xFF) return std::nanf("");
  return nibble::nvfp4::e2m1_to_float(c % 2 == 0 ? byte & 0xF : byte >> 4) *
         std::ldexp(1.0f, int(e) - 127);
}

// MXFP4 [n, k] with random codes and exponents in [lo, hi], plus `edges` written over the first
// blocks: the layout's elements are the OCP values bit for bit wherever the block's stored
// exponent e - shift is at least kW4A16Mxfp4MinScale, zero where it is below.
void check_mxfp4(std::mt19937_64& rng, std::int64_t n, std::int64_t k, int lo, int hi,
                 const std::vector<std::uint8_t>& edges, bool k_major) {
  std::vector<std::uint8_t> packed(std::size_t(n * k / 2)), e8m0(std::size_t(n * k / 32));
  for (auto& b : packed) b = std::uint8_t(rng());
  std::uniform_int_distribution<int> exponent(lo, hi);
  for (auto& e : e8m0) e = std::uint8_t(exponent(rng));
  for (std::size_t i = 0; i < edges.size() && i < e8m0.size(); ++i) e8m0[i] = edges[i];
  const auto w = nibble::nvfp4::repack_mxfp4_for_w4a16(packed, e8m0, n, k, k_major);
  const auto ref = nibble::nvfp4::repack_mxfp4_for_w4a16_reference(packed, e8m0, n, k, k_major);
  const int largest = *std::max_element(e8m0.begin(), e8m0.end());
  const int shift = std::max(0, largest - nibble::nvfp4::kW4A16Mxfp4MaxScale);
  const std::string name = std::string(k_major ? "k-major" : "group-major") + " MXFP4 [" +
                           std::to_string(n) + ", " + std::to_string(k) + "], e in [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]";
  expect(w.tiles == ref.tiles && w.scales == ref.scales &&
             w.format == nibble::nvfp4::W4A16Format::kMxfp4,
         name + ": the reference's bytes");
  expect(w.global_factor == std::ldexp(1.0f, shift),
         name + ": global factor 2^" + std::to_string(shift));
  std::int64_t bad = 0, zeroed = 0, exact = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < k; ++c) {
      const int e = e8m0[std::size_t(r * (k / 32) + c / 32)];
      const float got = nibble::nvfp4::w4a16_element(w, r, c);
      const float want = ocp_mxfp4(packed, e8m0, k, r, c);
      if (e - shift < nibble::nvfp4::kW4A16Mxfp4MinScale) {
        ++zeroed;
        bad += got != 0.0f;
      } else {
        ++exact;
        // Bit for bit: the same float, Inf included (6 * 2^127 overflows FP32 in both).
        std::uint32_t a, b;
        std::memcpy(&a, &got, 4);
        std::memcpy(&b, &want, 4);
        bad += a != b && !(got == 0.0f && want == 0.0f);
      }
    }
  }
  // The dequantising kernel's reference: BF16 of e2m1 * 2^(s - 127), exact, times the factor.
  std::int64_t dense_bad = 0;
  const auto dense = nibble::nvfp4::w4a16_dequantize_rows(w, 0, n);
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < k; ++c) {
      const float v = nibble::nvfp4::bf16_to_float(dense[std::size_t(r * k + c)]);
      dense_bad += v * w.global_factor != nibble::nvfp4::w4a16_element(w, r, c);
    }
  }
  expect(bad == 0 && dense_bad == 0, name + ": " + std::to_string(exact) + " elements exact, " +
                                         std::to_string(zeroed) + " zeroed; " +
                                         std::to_string(bad) + " element and " +
                                         std::to_string(dense_bad) + " dense mismatches");
}

template <class F>
void expect_throws(F f, const std::string& what) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    expect(true, what + " (" + e.what() + ")");
    return;
  }
  expect(false, what + ": no exception");
}

}  // namespace

int main() {
  std::mt19937_64 rng(7);
  const std::int64_t shapes[][2] = {{1, 16}, {3, 48}, {8, 64}, {9, 80}, {130, 1040}, {257, 208}};
  for (bool k_major : {false, true}) {
    for (const auto& s : shapes) check_shape(rng, s[0], s[1], k_major);
  }
  // MXFP4: gpt-oss-like exponents (weights around 2^-8 .. 2^1), the whole E8M0 range with the
  // edges 0, 1, 127 and 254 (a shift of 116: 254 lands at the top, 0 .. 120 below the exact
  // range), and a range that needs no shift with 138 at the top and 4 / 5 at the bottom.
  for (bool k_major : {false, true}) {
    check_mxfp4(rng, 130, 1088, 112, 130, {}, k_major);
    check_mxfp4(rng, 9, 96, 0, 254, {0, 1, 127, 254}, k_major);
    check_mxfp4(rng, 257, 320, 5, 138, {4, 5, 137, 138}, k_major);
  }
  {
    std::vector<std::uint8_t> packed(8 * 32 / 2), e8m0(8, 127);
    expect_throws([&] { nibble::nvfp4::repack_mxfp4_for_w4a16(packed, e8m0, 8, 48); },
                  "MXFP4: k not a multiple of 32 is refused");
    e8m0[5] = 0xFF;  // E8M0 NaN: the CPU backend would compute NaN; the kernels' load refuses it
    expect(std::isnan(ocp_mxfp4(packed, e8m0, 32, 5, 0)), "MXFP4: E8M0 255 is NaN (OCP)");
    expect_throws([&] { nibble::nvfp4::repack_mxfp4_for_w4a16(packed, e8m0, 8, 32); },
                  "MXFP4: an E8M0 NaN scale is refused");
    expect_throws([&] { nibble::nvfp4::repack_mxfp4_for_w4a16_reference(packed, e8m0, 8, 32); },
                  "MXFP4: an E8M0 NaN scale is refused by the reference");
  }
  std::vector<std::uint8_t> packed(8 * 16 / 2), scales(8 * 16 / 16, 0x38);
  expect_throws([&] { nibble::nvfp4::repack_for_w4a16(packed, scales, 8, 24, 1.0f); },
                "k not a multiple of 16 is refused");
  expect_throws([&] { nibble::nvfp4::repack_for_w4a16(packed, scales, 9, 16, 1.0f); },
                "sizes that disagree are refused");
  scales[3] = 0x7F;
  expect_throws([&] { nibble::nvfp4::repack_for_w4a16(packed, scales, 8, 16, 1.0f); },
                "a NaN block scale is refused");
  expect_throws([&] { nibble::nvfp4::repack_for_w4a16_reference(packed, scales, 8, 16, 1.0f); },
                "a NaN block scale is refused by the reference");
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
