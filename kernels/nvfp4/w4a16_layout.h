#pragma once
// The W4A16 weight layout: an NVFP4 weight [N, K] repacked once at load so that each lane of
// a warp holds, in one 8-byte word, the E2M1 values of its mma.sync m16n8k16 B fragments for
// four consecutive k16 steps. The kernels (w4a16_gemm.cu) read nothing else. The same lane
// words of two 8-row tiles form an m16n8k16 A fragment (rows g and g + 8), which the 8-row
// swapped tile (kM8) uses with x as the B operand.
//
// Tiles of 8 rows (n) x 64 columns (k), 256 bytes each; the 16 tiles of a 128-row group at one
//   k step are contiguous (4 KB, a "group step"). Group steps are stored in one of two orders:
//   group-major [N_padded/128][K_padded/64] (a block that owns 128 rows streams one contiguous
//   run along K) or k-major [K_padded/64][N_padded/128] (blocks working on the same k step of
//   neighbouring groups read neighbouring memory, so the whole GPU sweeps one window). On H100
//   both orders measured the same (docs/performance.md); group-major is the default.
//   lane l (0..31) owns bytes l*8..l*8+7 of the tile: row n = 8*tile_n + l/4, t = l%4.
//   Word w (0, 1; little-endian 32-bit) covers k16 steps 2w and 2w+1 of the tile.
//   A word holds 4 bf16x2 fragment pairs P = 2*(step%2) + h (h = 0: k = 2t, 2t+1; h = 1:
//   k = 2t+8, 2t+9), each of two elements (lower k in the low half, "upper" in the high half).
//   An element is its E2M1 code split into magnitude bits m0 m1 m2 and sign s, placed so that
//   one shift and one mask put them at bf16 bits 6..8 and 15 (+16 for the upper element):
//     P0: m at 6,7,8   s at 15     (decode: w & 0x81C081C0)
//     P1: m at 3,4,5   s at 12     (decode: (w << 3) & 0x81C081C0)
//     P2: m at 0,1,2   s at 9      (decode: (w << 6) & 0x81C081C0)
//     P3: m at 10,11,13 s at 14    (the bits left over: three shifts, see w4a16_gemm.cu)
//   and the same at +16 for the upper element.
// Block scales (E4M3 codes, made non-negative: a negative scale's sign flips the sign bits of
// its block's codes instead), 32 bytes per tile, same tile and group-step order (512 B
// per group step):
//   byte 4*(n%8) + step is the scale of row n for k16 step `step` of the tile.
// Padding: N up to a multiple of kNAlign, K up to a multiple of kKAlign, with zero codes and
// zero scales. A block whose scale is zero has its codes zeroed (the value is 0 either way);
// the kernels rely on it. NaN block scales are rejected.
//
// Two source formats share the codes' layout and differ in the scale bytes (W4A16Format; the
// kernels are templated on it, so the NVFP4 decode is unchanged):
//   kNvfp4: the bytes above, E4M3 codes; value = e2m1 * e4m3 * global_factor.
//   kMxfp4 (OCP MX, gpt-oss's experts: one E8M0 exponent e per 32 values, 2^(e - 127)): the byte
//     of each k16 step is s = e - shift of its 32-value block (both k16 steps of a block hold the
//     same s) and global_factor = 2^shift; value = e2m1 * 2^(s - 127) * global_factor. The
//     kernels turn s into the bf16 scale 2^(s - 127) * 2^116 (NVFP4's "scale * 2^116") by placing
//     s + 116 in a bf16 exponent field, one shift and one add and no conversion, and the decode's
//     one bf16 multiply then only moves the code's exponent. That is exact for s in
//     [kW4A16Mxfp4MinScale, kW4A16Mxfp4MaxScale]: shift = max(0, largest e - 138) keeps every
//     block under the top, and a block with s < 5 (every |value| < 6 * 2^-122 * global_factor,
//     under BF16's exact range in the decode) has its codes and s zeroed. E8M0 255 (NaN) is
//     rejected, as NVFP4's NaN scales are.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/nvfp4/w4a16_format.h"

namespace nibble::nvfp4 {

inline constexpr std::int64_t kW4A16TileN = 8;
inline constexpr std::int64_t kW4A16TileK = 64;
inline constexpr std::int64_t kW4A16TileBytes = 256;
inline constexpr std::int64_t kW4A16ScaleTileBytes = 32;
inline constexpr std::int64_t kW4A16NAlign = 128;  // rows per tile group = block tile in n
inline constexpr std::int64_t kW4A16KAlign = 64;

inline constexpr int kW4A16Mxfp4MinScale = 5;        // s below: the block is zeroed
inline constexpr int kW4A16Mxfp4MaxScale = 138;      // s + 116 <= 254, a normal bf16 exponent
inline constexpr std::int64_t kMxfp4BlockSize = 32;  // values per E8M0 scale

struct W4A16Weight {
  std::int64_t n = 0, k = 0;  // logical shape
  W4A16Format format = W4A16Format::kNvfp4;
  std::int64_t n_padded = 0, k_padded = 0;
  float global_factor = 1.0f;        // multiply form
  bool k_major = false;              // group-step order (see above)
  std::vector<std::uint8_t> tiles;   // [group steps][16][256]
  std::vector<std::uint8_t> scales;  // [group steps][16][32], E4M3 codes or MXFP4 exponents
};

// packed: [n, k/2] E2M1 pairs (element 2i in the low nibble); scales: [n, k/16] E4M3.
// Throws std::invalid_argument on sizes that disagree, k % 16 != 0 or a NaN block scale.
W4A16Weight repack_for_w4a16(std::span<const std::uint8_t> packed,
                             std::span<const std::uint8_t> scales, std::int64_t n, std::int64_t k,
                             float global_factor, bool k_major = false);
// The same bytes, computed element by element from the layout's definition above: the reference
// the fast repack is tested against (slow: ~25 MB/s).
W4A16Weight repack_for_w4a16_reference(std::span<const std::uint8_t> packed,
                                       std::span<const std::uint8_t> scales, std::int64_t n,
                                       std::int64_t k, float global_factor, bool k_major = false);

// MXFP4 as gpt-oss ships it (`*_blocks`, `*_scales`): packed [n, k/2] E2M1 pairs (element 2i in
// the low nibble, as OCP MX and the checkpoint store them), e8m0 [n, k/32]. The same codes'
// layout; the scale bytes and global_factor as the header says. Throws std::invalid_argument on
// sizes that disagree, k % 32 != 0 or an E8M0 NaN (255).
W4A16Weight repack_mxfp4_for_w4a16(std::span<const std::uint8_t> packed,
                                   std::span<const std::uint8_t> e8m0, std::int64_t n,
                                   std::int64_t k, bool k_major = false);
// The same bytes from the layout's definition, element by element.
W4A16Weight repack_mxfp4_for_w4a16_reference(std::span<const std::uint8_t> packed,
                                             std::span<const std::uint8_t> e8m0, std::int64_t n,
                                             std::int64_t k, bool k_major = false);

// The scale one layout scale byte stands for: e4m3 (kNvfp4) or 2^(s - 127) (kMxfp4).
float w4a16_scale_value(W4A16Format format, std::uint8_t byte);

// CPU reference of the layout: element (r, c) decoded from the repacked bytes,
// e2m1 * scale * global_factor; equals dequantize_element of the source matrix (MXFP4: the OCP
// value e2m1 * 2^(e - 127), bit for bit, wherever the block is not zeroed as the header says).
float w4a16_element(const W4A16Weight& w, std::int64_t r, std::int64_t c);

// CPU reference of the dequantising kernel (w4a16_dequant.h): rows [row_begin, row_begin + rows)
// of the weight as BF16 bits of e2m1 * scale (w4a16_scale_value), [rows, k] row-major, without the
// global factor (the GEMM applies it: alpha). The product has at most 6 significant bits, so BF16
// holds it exactly and the values times global_factor are w4a16_element's. Rows past n are not
// written (the result has min(rows, n - row_begin) rows).
std::vector<std::uint16_t> w4a16_dequantize_rows(const W4A16Weight& w, std::int64_t row_begin,
                                                 std::int64_t rows);

// Weight bytes a kernel streams for this layout (codes + scales, padding included).
inline std::int64_t w4a16_bytes(const W4A16Weight& w) {
  return std::int64_t(w.tiles.size() + w.scales.size());
}

}  // namespace nibble::nvfp4
