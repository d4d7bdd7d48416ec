#pragma once
// A warp's copies of one k step of a slice block into a slot of its ring (w4a16_slice_common.cuh
// has the slot layout): the codes of the block's weight tiles, their scales, and the m rows of x,
// each lane issuing fixed 16-byte cp.async chunks from pointers it bumps once a step.
// GATHER (the MoE gate_up + SiLU form): the slot's tiles 0, 1 are the gate pair and tiles 2, 3
// the up pair of the same rows n / 2 further on, and x row r is read at x[token[row0 + r]].
#include <cstdint>

#include "kernels/nvfp4/w4a16_slice_common.cuh"

namespace nibble::kernels {
namespace {

// Where a warp's ring lies: ring_bytes at `ring` (generic) and ring_s (shared window), slots of
// slot_size bytes, x taking the first x_bytes of each.
template <class S>
struct SliceRing {
  unsigned slot_size, x_bytes, ring_bytes;
  const std::uint8_t* ring;
  unsigned ring_s;
  __device__ __forceinline__ SliceRing(std::uint8_t* smem, int m, int warp)
      : slot_size(slot_bytes<S>(m)),
        x_bytes(unsigned(m) * 128),
        ring_bytes(S::kDepth * slot_size),
        ring(smem + warp * ring_bytes),
        ring_s(unsigned(__cvta_generic_to_shared(ring))) {}
};

// Where a warp's k steps start in the weight layout for a slice of weight rows from n0: the group
// step of its first k step, the slice's first tile in its 128-row group, and its k step count
// (warp w takes steps w, w + warps, ...).
template <class S>
struct SliceStart {
  std::int64_t group_step0;
  int tile0;
  int steps;
  __device__ __forceinline__ SliceStart(std::int64_t n0, W4A16Strides strides, std::int64_t tiles_k,
                                        int warp)
      : group_step0((n0 / 128) * strides.group + warp * strides.kt),
        tile0(int(n0 % 128) / 8),
        steps(tiles_k > warp ? int((tiles_k - warp + S::kWarps - 1) / S::kWarps) : 0) {}
};

template <class S, bool ONE_SIDE, int MT, bool GATHER>
struct SliceLoader {
  static constexpr int kScaleChunks = S::kScaleBytes / 16;
  static constexpr int kXPasses = 2 * MT;  // rows of x a lane copies (4 apart) without ONE_SIDE
  int m;
  std::int64_t k;
  // Codes: 1, 2 or 4 x 16 B, 512 B apart.
  const std::uint8_t* w_src;
  std::int64_t w_step;
  unsigned code_dst;
  std::int64_t up_code_jump;  // GATHER: from the gate pair to the up pair
  // ONE_SIDE: side chunk `lane` of the step, scale chunks first, then x chunk c % 8 of row c / 8
  // (c = lane - scale chunks). Otherwise: scale chunk `lane` (lanes < scale chunks), and x chunk
  // lane % 8 of rows lane / 8 + 4j, j < kXPasses.
  bool side_scale;
  int xc, xr0;
  bool x_real0;
  const std::uint8_t* s_src;
  const std::uint16_t* x_src;
  // GATHER: where row xr0 + 4 j of the block starts in x, from x_src (its token's row).
  std::int64_t x_row_at[GATHER ? kXPasses : 1] = {};
  unsigned s_dst, x_dst0;
  // ONE_SIDE: one pointer, step and offset for either kind of side chunk; a scale chunk is never
  // past k.
  const std::uint8_t* side_src;
  std::int64_t side_step;
  unsigned side_dst;
  bool side_on;
  int x_cols_left;  // <= 0: the chunk is past k, zero-filled

  // The slice's first weight rows n0 within the layout (group_step0: its group step of the warp's
  // first k step, tile0 its first tile in the 128-row group); GATHER: up_groups / up_tiles the up
  // pair's distance from the gate pair, token and row0 the gathered rows.
  __device__ __forceinline__ SliceLoader(const std::uint16_t* x, int rows, std::int64_t k_cols,
                                         const std::uint8_t* tiles, const std::uint8_t* scales,
                                         W4A16Strides strides, std::int64_t group_step0, int tile0,
                                         std::int64_t up_groups, int up_tiles, unsigned x_bytes,
                                         const std::int32_t* token, std::int32_t row0, int lane,
                                         int warp)
      : m(rows), k(k_cols) {
    w_src = tiles + group_step0 * 4096 + tile0 * 256 + lane * 16;
    w_step = S::kWarps * strides.kt * 4096;
    code_dst = x_bytes + unsigned(lane) * 16;
    up_code_jump = up_groups * 4096 + up_tiles * 256;
    side_scale = lane < kScaleChunks;
    const int x_chunk = ONE_SIDE ? (side_scale ? 0 : lane - kScaleChunks) : lane;
    xc = x_chunk % 8, xr0 = x_chunk / 8;
    x_real0 = (!ONE_SIDE || !side_scale) && xr0 < m;
    s_src = scales + group_step0 * 512 + tile0 * 32 + lane * 16;
    // GATHER: scale chunks 4..7 are the up pair's (tiles 2, 3 of the slot).
    if (GATHER && lane >= 4) s_src += up_groups * 512 + up_tiles * 32 - 64;
    x_src = x + (x_real0 && !GATHER ? xr0 * k : 0) + warp * 64 + xc * 8;
    // The table and the tokens are the routing's, written before the rows are read.
    if constexpr (GATHER) {
#pragma unroll
      for (int j = 0; j < kXPasses; ++j)
        x_row_at[j] = xr0 + 4 * j < m ? std::int64_t(token[row0 + xr0 + 4 * j]) * k : 0;
    }
    s_dst = x_bytes + S::kCodeBytes + unsigned(lane) * 16;
    // Row xr0 + 4j sits at x_dst0 + 512 j, its chunk swizzled by (xr0 + 4j) % 8: j odd flips
    // chunk bit 2 (xr0 < 4).
    x_dst0 = unsigned(xr0 * 128 + ((xc ^ xr0) * 16));
    side_src = side_scale ? s_src : reinterpret_cast<const std::uint8_t*>(x_src);
    side_step = side_scale ? w_step / 8 : S::kWarps * 64 * 2;
    side_dst = side_scale ? s_dst : x_dst0;
    side_on = side_scale || x_real0;
    x_cols_left = side_scale && ONE_SIDE ? 1 << 30 : int(k - warp * 64 - xc * 8);
  }

  __device__ __forceinline__ void codes(unsigned slot) {
#pragma unroll
    for (int c = 0; c < S::kCodeBytes / 512; ++c) {
      if constexpr (GATHER) {
        cp_async16_to(slot + code_dst + c * 512, w_src + (c == 0 ? 0 : up_code_jump), 16);
      } else {
        cp_async16_to(slot + code_dst + c * 512, w_src + c * 512, 16);
      }
    }
    w_src += w_step;
  }
  __device__ __forceinline__ void side(unsigned slot) {
    cp_async16_to(slot + side_dst, side_src, x_cols_left > 0 ? 16 : 0);
    side_src += side_step;
    x_cols_left -= S::kWarps * 64;
  }
  __device__ __forceinline__ void scales(unsigned slot) {
    if (side_scale) cp_async16_to(slot + s_dst, s_src, 16);
    s_src += w_step / 8;
  }
  __device__ __forceinline__ void x_rows(unsigned slot) {
    const unsigned bytes = x_cols_left > 0 ? 16 : 0;
#pragma unroll
    for (int j = 0; j < kXPasses; ++j) {
      if (xr0 + 4 * j < m) {
        const std::uint16_t* src = x_src + j * 4 * k;
        if constexpr (GATHER) src = x_src + x_row_at[j];
        cp_async16_to((slot + x_dst0 + unsigned(j * 512)) ^ unsigned((j & 1) * 64), src, bytes);
      }
    }
    x_src += S::kWarps * 64;
    x_cols_left -= S::kWarps * 64;
  }
  // A whole k step (the ring loop's).
  __device__ __forceinline__ void step(unsigned slot) {
    codes(slot);
    if constexpr (ONE_SIDE) {
      if (side_on) side(slot);
    } else {
      scales(slot);
      x_rows(slot);
    }
  }
  // The prologue's halves: a step's weights (before waiting for the previous kernel: it does not
  // write them), then its x (after).
  __device__ __forceinline__ void step_weights(unsigned slot) {
    codes(slot);
    if constexpr (ONE_SIDE) {
      if (side_scale) side(slot);
    } else {
      scales(slot);
    }
  }
  __device__ __forceinline__ void step_x(unsigned slot) {
    if constexpr (ONE_SIDE) {
      if (x_real0) side(slot);
    } else {
      x_rows(slot);
    }
  }
};

}  // namespace
}  // namespace nibble::kernels
