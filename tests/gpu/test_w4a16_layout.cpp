// CPU checks of the W4A16 repacked weight layout (kernels/nvfp4/w4a16_layout.h): the repack writes
// the element-by-element reference's bytes, every element decodes to the reference
// dequantization, padding is zero, bad inputs are refused; the gate_up pair order of the decode
// SiLU fusion.
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
  const auto ref = nibble::nvfp4::repack_for_w4a16_reference(q.packed, q.scales, n, k,
                                                              q.global_factor, k_major);
  expect(w.tiles == ref.tiles && w.scales == ref.scales,
         std::string(k_major ? "k-major" : "group-major") + " repack [" + std::to_string(n) +
             ", " + std::to_string(k) + "]: the reference's bytes");
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

// gate_up_pair_source_row is a bijection that puts gate row 8 u + c at 16 u + c and its up row
// right after the 8 gate rows (16 u + 8 + c); pair_gate_up_rows moves whole rows that way.
void check_gate_up_pairs() {
  for (const std::int64_t width : {8, 16, 264, 14336}) {
    std::vector<int> seen(std::size_t(2 * width), 0);
    bool placed = true;
    for (std::int64_t p = 0; p < 2 * width; ++p) {
      const std::int64_t from = nibble::nvfp4::gate_up_pair_source_row(p, width);
      if (from < 0 || from >= 2 * width) {
        placed = false;
        continue;
      }
      ++seen[std::size_t(from)];
      const std::int64_t u = p / 16, c = p % 16;
      placed &= c < 8 ? from == 8 * u + c : from == width + 8 * u + c - 8;
    }
    const bool bijection = std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; });
    expect(bijection && placed, "gate_up pair order, width " + std::to_string(width));
  }
  // Rows of 3 bytes, each byte naming its source row: row p must come from its source row.
  const std::int64_t width = 24;
  const std::size_t row_bytes = 3;
  std::vector<std::uint8_t> rows(std::size_t(2 * width) * row_bytes);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::uint8_t(i / row_bytes);
  const auto paired = nibble::nvfp4::pair_gate_up_rows(rows, width, row_bytes);
  bool moved = paired.size() == rows.size();
  for (std::int64_t p = 0; moved && p < 2 * width; ++p)
    for (std::size_t b = 0; b < row_bytes; ++b)
      moved &= paired[std::size_t(p) * row_bytes + b] ==
               std::uint8_t(nibble::nvfp4::gate_up_pair_source_row(p, width));
  expect(moved, "pair_gate_up_rows moves whole rows");
}

// rope_pair_source_row: a bijection that keeps v rows, puts element i < D/2 of every q and k head
// at rope_paired_position(i) and its partner i + D/2 eight rows later, in the same 16-row unit.
void check_rope_pairs() {
  for (const auto& [heads, kv_heads, d] :
       {std::tuple{4, 2, 64}, std::tuple{32, 8, 128}, std::tuple{2, 1, 16}}) {
    const std::int64_t qk = std::int64_t(heads + kv_heads) * d, n = qk + std::int64_t(kv_heads) * d;
    std::vector<int> seen(std::size_t(n), 0);
    bool placed = true;
    for (std::int64_t p = 0; p < n; ++p) {
      const std::int64_t from = nibble::nvfp4::rope_pair_source_row(p, qk, d);
      if (from < 0 || from >= n) {
        placed = false;
        continue;
      }
      ++seen[std::size_t(from)];
      if (p >= qk) {
        placed &= from == p;
        continue;
      }
      const std::int64_t head = p / d, i = from % d;
      placed &= from / d == head && nibble::nvfp4::rope_paired_position(i, d) == p % d;
      if (i < d / 2)  // the partner, 8 rows on in the same 16-row unit
        placed &= p % 16 < 8 && nibble::nvfp4::rope_pair_source_row(p + 8, qk, d) == from + d / 2;
    }
    const bool bijection = std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; });
    expect(bijection && placed, "qkv rope pair order, " + std::to_string(heads) + "+" +
                                    std::to_string(kv_heads) + " heads of " + std::to_string(d));
  }
  const std::int64_t d = 16, qk = 3 * d, n = 4 * d;
  std::vector<std::uint8_t> rows(std::size_t(n) * 2);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::uint8_t(i / 2);
  const auto paired = nibble::nvfp4::pair_rope_rows(rows, n, qk, d, 2);
  bool moved = paired.size() == rows.size();
  for (std::int64_t p = 0; moved && p < n; ++p)
    moved &=
        paired[std::size_t(p) * 2] == std::uint8_t(nibble::nvfp4::rope_pair_source_row(p, qk, d)) &&
        paired[std::size_t(p) * 2 + 1] == paired[std::size_t(p) * 2];
  expect(moved, "pair_rope_rows moves whole rows");
  expect_throws([&] { nibble::nvfp4::pair_rope_rows(rows, n, qk, 24, 2); },
                "rope pairs of a head size not a multiple of 16 are refused");
}

}  // namespace

int main() {
  check_gate_up_pairs();
  check_rope_pairs();
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
  std::vector<std::uint8_t> odd(std::size_t(2 * 12) * 2);
  expect_throws([&] { nibble::nvfp4::pair_gate_up_rows(odd, 12, 2); },
                "gate_up pairs of a width not a multiple of 8 are refused");
  expect_throws([&] { nibble::nvfp4::pair_gate_up_rows(odd, 8, 2); },
                "gate_up pairs of the wrong size are refused");
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
