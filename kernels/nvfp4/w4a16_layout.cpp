#include "kernels/nvfp4/w4a16_layout.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"

namespace nibble::nvfp4 {
namespace {

struct Position {
  std::int64_t word;   // byte offset of the lane's 32-bit word in tiles
  int bits[4];         // bit of m0, m1, m2, sign within the word
  std::int64_t scale;  // into scales
};

// Bit of m0, m1, m2 and the sign of a code in its lane word, by fragment pair P (the lower
// element; the upper one 16 bits higher). See the header.
constexpr int kCodeBits[4][4] = {{6, 7, 8, 15}, {3, 4, 5, 12}, {0, 1, 2, 9}, {10, 11, 13, 14}};

// The tile holding row r at k tile kt, in the weight's group-step order.
std::int64_t tile_index(const W4A16Weight& w, std::int64_t r, std::int64_t kt) {
  const std::int64_t tiles_k = w.k_padded / kW4A16TileK;
  const std::int64_t groups = w.n_padded / kW4A16NAlign;
  const std::int64_t group = r / kW4A16NAlign;
  const std::int64_t group_step = w.k_major ? kt * groups + group : group * tiles_k + kt;
  return group_step * (kW4A16NAlign / kW4A16TileN) + (r % kW4A16NAlign) / kW4A16TileN;
}

// Where element (r, c) lives in the layout (see the header for the derivation).
Position locate(const W4A16Weight& w, std::int64_t r, std::int64_t c) {
  const std::int64_t tile = tile_index(w, r, c / kW4A16TileK);
  const std::int64_t kk = c % kW4A16TileK;
  const int step = int(kk / 16), within = int(kk % 16);
  const int h = within / 8, t = (within % 8) / 2, upper = within % 2;
  const int lane = int(r % kW4A16TileN) * 4 + t;
  const int pair = 2 * (step % 2) + h;
  Position pos;
  pos.word = tile * kW4A16TileBytes + lane * 8 + (step / 2) * 4;
  for (int i = 0; i < 4; ++i) pos.bits[i] = kCodeBits[pair][i] + 16 * upper;
  pos.scale = tile * kW4A16ScaleTileBytes + (r % kW4A16TileN) * 4 + step;
  return pos;
}

std::uint32_t load_word(const std::vector<std::uint8_t>& bytes, std::int64_t at) {
  std::uint32_t w = 0;
  for (int i = 0; i < 4; ++i) w |= std::uint32_t(bytes[std::size_t(at + i)]) << (8 * i);
  return w;
}

}  // namespace

namespace {

// The padded, zeroed result both forms of the repack start from (sizes already checked).
W4A16Weight empty_layout(std::int64_t n, std::int64_t k, W4A16Format format, float global_factor,
                         bool k_major) {
  W4A16Weight w;
  w.n = n;
  w.k = k;
  w.format = format;
  w.n_padded = (n + kW4A16NAlign - 1) / kW4A16NAlign * kW4A16NAlign;
  w.k_padded = (k + kW4A16KAlign - 1) / kW4A16KAlign * kW4A16KAlign;
  w.global_factor = global_factor;
  w.k_major = k_major;
  const std::int64_t tiles = (w.n_padded / kW4A16TileN) * (w.k_padded / kW4A16TileK);
  w.tiles.assign(std::size_t(tiles * kW4A16TileBytes), 0);
  w.scales.assign(std::size_t(tiles * kW4A16ScaleTileBytes), 0);
  return w;
}

void check_sizes(std::span<const std::uint8_t> packed, std::span<const std::uint8_t> scales,
                 std::int64_t n, std::int64_t k, std::int64_t block, const char* who) {
  if (n <= 0 || k <= 0 || k % block != 0 || packed.size() != std::size_t(n * k / 2) ||
      scales.size() != std::size_t(n * k / block)) {
    throw std::invalid_argument(std::string(who) + ": weight [" + std::to_string(n) + ", " +
                                std::to_string(k) + "] needs k a positive multiple of " +
                                std::to_string(block) + ", " + std::to_string(n * k / 2) +
                                " packed bytes (got " + std::to_string(packed.size()) + ") and " +
                                std::to_string(n * k / block) + " scales (got " +
                                std::to_string(scales.size()) + ")");
  }
}

void refuse_nan_scale(const char* who, std::int64_t r, std::int64_t block) {
  throw std::invalid_argument(std::string(who) + ": NaN block scale at row " + std::to_string(r) +
                              ", block " + std::to_string(block));
}

// What the layout stores for one 16-value block (k16 step): its scale byte, whether its codes
// are zeroed, whether their signs flip.
struct StepScale {
  std::uint8_t stored;
  bool zero, negative;
};

// NVFP4: a zero scale zeroes the codes (the kernels need it), a negative scale's sign moves into
// the codes (e2m1 * -s == -e2m1 * s exactly; the kernels convert non-negative scales with one
// shift and one add): a negative zero leaves sign bits only.
struct Nvfp4Steps {
  std::span<const std::uint8_t> scales;
  std::int64_t k;
  const char* who;
  StepScale operator()(std::int64_t r, std::int64_t step) const {
    const std::uint8_t scale = scales[std::size_t(r * (k / kBlockSize) + step)];
    if ((scale & 0x7F) == 0x7F) refuse_nan_scale(who, r, step);
    return {std::uint8_t(scale & 0x7F), (scale & 0x7F) == 0, (scale & 0x80) != 0};
  }
};

// MXFP4: s = e - shift in both k16 steps of the 32-value block; s below the kernels' exact range
// zeroes the block (w4a16_layout.h).
struct Mxfp4Steps {
  std::span<const std::uint8_t> e8m0;
  std::int64_t k;
  int shift;
  StepScale operator()(std::int64_t r, std::int64_t step) const {
    const int s = int(e8m0[std::size_t(r * (k / kMxfp4BlockSize) + step / 2)]) - shift;
    if (s < kW4A16Mxfp4MinScale) return {0, true, false};
    return {std::uint8_t(s), false, false};
  }
};

// The shift that brings the largest E8M0 exponent to kW4A16Mxfp4MaxScale at most; refuses NaN.
int mxfp4_shift(std::span<const std::uint8_t> e8m0, std::int64_t k, const char* who) {
  int largest = 0;
  const std::int64_t per_row = k / kMxfp4BlockSize;
  for (std::size_t i = 0; i < e8m0.size(); ++i) {
    if (e8m0[i] == 0xFF)
      refuse_nan_scale(who, std::int64_t(i) / per_row, std::int64_t(i) % per_row);
    largest = std::max(largest, int(e8m0[i]));
  }
  return std::max(0, largest - kW4A16Mxfp4MaxScale);
}

// spread[P][code]: the lane-word bits of one E2M1 code as the lower element of pair P
// (kCodeBits; the upper element is the same 16 bits higher).
struct CodeSpread {
  std::uint32_t bits[4][16];
  CodeSpread() {
    for (int pair = 0; pair < 4; ++pair)
      for (int code = 0; code < 16; ++code) {
        std::uint32_t b = 0;
        for (int i = 0; i < 4; ++i)
          if ((code >> i) & 1) b |= 1u << kCodeBits[pair][i];
        bits[pair][code] = b;
      }
  }
};

// A 16-element block at a time: its scale byte, then each of the 4 lanes it feeds gets its 4
// codes (2 pairs x lower / upper) as one 32-bit OR, from two bytes of the block. The same bytes
// as the reference (test_w4a16_layout), ~20x faster (~590 against ~25 MB/s of codes and scales
// on one core of the build machine): loading Qwen3-30B-A3B repacks ~16 GB of them.
template <class Steps>
void repack_fast(W4A16Weight& w, std::span<const std::uint8_t> packed, const Steps& steps) {
  static const CodeSpread spread;
  const std::int64_t n = w.n, k = w.k, blocks_per_row = k / kBlockSize;
  constexpr std::int64_t kSteps = kW4A16TileK / kBlockSize;  // k16 steps a tile
  for (std::int64_t r = 0; r < n; ++r) {
    const int row8 = int(r % kW4A16TileN);
    const std::uint8_t* row_codes = packed.data() + r * (k / 2);
    for (std::int64_t b = 0; b < blocks_per_row; ++b) {
      const StepScale scale = steps(r, b);
      const std::int64_t tile = tile_index(w, r, b / kSteps);
      const int step = int(b % kSteps);
      w.scales[std::size_t(tile * kW4A16ScaleTileBytes + row8 * 4 + step)] = scale.stored;
      if (scale.zero && !scale.negative) continue;
      const std::uint8_t flip = scale.negative ? 0x88 : 0x00;
      const std::uint8_t* codes = row_codes + b * (kBlockSize / 2);
      const std::uint32_t(&lo)[16] = spread.bits[2 * (step % 2)];
      const std::uint32_t(&hi)[16] = spread.bits[2 * (step % 2) + 1];
      std::uint8_t* words =
          w.tiles.data() + tile * kW4A16TileBytes + row8 * 32 + (step / 2) * 4;  // lane row8*4
      for (int t = 0; t < 4; ++t) {
        // Elements 2t, 2t + 1 (pair h = 0) and 8 + 2t, 9 + 2t (h = 1) of the block.
        const std::uint8_t b0 = (scale.zero ? 0 : codes[t]) ^ flip,
                           b1 = (scale.zero ? 0 : codes[4 + t]) ^ flip;
        const std::uint32_t word =
            lo[b0 & 15] | (lo[b0 >> 4] << 16) | hi[b1 & 15] | (hi[b1 >> 4] << 16);
        std::uint8_t* at = words + t * 8;  // little-endian, as the kernels load it
        for (int i = 0; i < 4; ++i) at[i] |= std::uint8_t(word >> (8 * i));
      }
    }
  }
}

// The layout's definition, element by element (locate); the test's reference for the repack.
template <class Steps>
void repack_reference(W4A16Weight& w, std::span<const std::uint8_t> packed, const Steps& steps) {
  for (std::int64_t r = 0; r < w.n; ++r) {
    for (std::int64_t c = 0; c < w.k; ++c) {
      const StepScale scale = steps(r, c / kBlockSize);
      const std::uint8_t byte = packed[std::size_t(r * (w.k / 2) + c / 2)];
      std::uint8_t code = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      if (scale.zero) code = 0;
      if (scale.negative) code ^= 0x8;
      const Position pos = locate(w, r, c);
      for (int i = 0; i < 4; ++i) {
        if ((code >> i) & 1) {
          w.tiles[std::size_t(pos.word + pos.bits[i] / 8)] |= std::uint8_t(1u << (pos.bits[i] % 8));
        }
      }
      w.scales[std::size_t(pos.scale)] = scale.stored;
    }
  }
}

}  // namespace

W4A16Weight repack_for_w4a16(std::span<const std::uint8_t> packed,
                             std::span<const std::uint8_t> scales, std::int64_t n, std::int64_t k,
                             float global_factor, bool k_major) {
  const char* who = "repack_for_w4a16";
  check_sizes(packed, scales, n, k, kBlockSize, who);
  W4A16Weight w = empty_layout(n, k, W4A16Format::kNvfp4, global_factor, k_major);
  repack_fast(w, packed, Nvfp4Steps{scales, k, who});
  return w;
}

W4A16Weight repack_for_w4a16_reference(std::span<const std::uint8_t> packed,
                                       std::span<const std::uint8_t> scales, std::int64_t n,
                                       std::int64_t k, float global_factor, bool k_major) {
  const char* who = "repack_for_w4a16_reference";
  check_sizes(packed, scales, n, k, kBlockSize, who);
  W4A16Weight w = empty_layout(n, k, W4A16Format::kNvfp4, global_factor, k_major);
  repack_reference(w, packed, Nvfp4Steps{scales, k, who});
  return w;
}

W4A16Weight repack_mxfp4_for_w4a16(std::span<const std::uint8_t> packed,
                                   std::span<const std::uint8_t> e8m0, std::int64_t n,
                                   std::int64_t k, bool k_major) {
  const char* who = "repack_mxfp4_for_w4a16";
  check_sizes(packed, e8m0, n, k, kMxfp4BlockSize, who);
  const int shift = mxfp4_shift(e8m0, k, who);
  W4A16Weight w = empty_layout(n, k, W4A16Format::kMxfp4, std::ldexp(1.0f, shift), k_major);
  repack_fast(w, packed, Mxfp4Steps{e8m0, k, shift});
  return w;
}

W4A16Weight repack_mxfp4_for_w4a16_reference(std::span<const std::uint8_t> packed,
                                             std::span<const std::uint8_t> e8m0, std::int64_t n,
                                             std::int64_t k, bool k_major) {
  const char* who = "repack_mxfp4_for_w4a16_reference";
  check_sizes(packed, e8m0, n, k, kMxfp4BlockSize, who);
  const int shift = mxfp4_shift(e8m0, k, who);
  W4A16Weight w = empty_layout(n, k, W4A16Format::kMxfp4, std::ldexp(1.0f, shift), k_major);
  repack_reference(w, packed, Mxfp4Steps{e8m0, k, shift});
  return w;
}

float w4a16_scale_value(W4A16Format format, std::uint8_t byte) {
  return format == W4A16Format::kMxfp4 ? std::ldexp(1.0f, int(byte) - 127) : e4m3_to_float(byte);
}

namespace {
// e2m1 * scale of element (r, c), read from the repacked bytes.
float unscaled_element(const W4A16Weight& w, std::int64_t r, std::int64_t c) {
  const Position pos = locate(w, r, c);
  const std::uint32_t word = load_word(w.tiles, pos.word);
  std::uint8_t code = 0;
  for (int i = 0; i < 4; ++i) code |= std::uint8_t(((word >> pos.bits[i]) & 1u) << i);
  return e2m1_to_float(code) * w4a16_scale_value(w.format, w.scales[std::size_t(pos.scale)]);
}
}  // namespace

float w4a16_element(const W4A16Weight& w, std::int64_t r, std::int64_t c) {
  return unscaled_element(w, r, c) * w.global_factor;
}

std::vector<std::uint16_t> w4a16_dequantize_rows(const W4A16Weight& w, std::int64_t row_begin,
                                                 std::int64_t rows) {
  if (row_begin < 0 || rows < 0) throw std::invalid_argument("w4a16_dequantize_rows: negative");
  const std::int64_t end = std::min(w.n, row_begin + rows);
  std::vector<std::uint16_t> out;
  if (end <= row_begin) return out;
  out.resize(std::size_t((end - row_begin) * w.k));
  for (std::int64_t r = row_begin; r < end; ++r) {
    for (std::int64_t c = 0; c < w.k; ++c) {
      out[std::size_t((r - row_begin) * w.k + c)] = float_to_bf16(unscaled_element(w, r, c));
    }
  }
  return out;
}

}  // namespace nibble::nvfp4
