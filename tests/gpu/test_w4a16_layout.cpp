// CPU checks of the W4A16 repacked weight layout (kernels/nvfp4/w4a16_layout.h): the repack writes
// the element-by-element reference's bytes, every element decodes to the reference
// dequantization, padding is zero, bad inputs are refused.
// Needs no GPU (ctest label unit). Plain main: the same source builds on the device image.
#include <algorithm>
#include <cstdint>
#include <cstdio>
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
