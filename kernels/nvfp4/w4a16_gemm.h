#pragma once
// W4A16 linear layer on the GPU: out[M, N] = x[M, K] . W[N, K]^T (+ residual), with W in the
// repacked layout of w4a16_layout.h, BF16 activations and output, FP32 accumulation on
// mma.sync m16n8k16 BF16 tensor cores (sm_80 and later; built for sm_90a and sm_120a/121a).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/nvfp4/w4a16_format.h"

namespace nibble::kernels {

// Device copy of a repacked weight (see nvfp4::W4A16Weight for the layout and shapes).
struct W4A16DeviceWeight {
  const std::uint8_t* tiles = nullptr;   // [group steps][16][256]
  const std::uint8_t* scales = nullptr;  // [group steps][16][32], E4M3 codes or E8M0 exponents
  std::int64_t n = 0, k = 0, n_padded = 0, k_padded = 0;
  float global_factor = 1.0f;
  bool k_major = false;  // group-step order of tiles and scales (nvfp4::W4A16Weight::k_major)
  // The scale bytes' format (nvfp4::W4A16Weight::format). MXFP4 runs in the MoE's grouped kernels
  // (the slice, fused decode and 64-row tile forms: w4a16_grouped.h) and the dequantising kernel;
  // the dense launches (w4a16_linear) answer cudaErrorNotSupported for it.
  nvfp4::W4A16Format format = nvfp4::W4A16Format::kNvfp4;
};

// Where a group step lives: group g, k step kt is group step g * group + kt * kt (in units of
// one group step: 4 KB of tiles, 512 B of scales).
struct W4A16Strides {
  std::int64_t group, kt;
};
inline W4A16Strides w4a16_strides(const W4A16DeviceWeight& w) {
  const std::int64_t groups = w.n_padded / 128, tiles_k = w.k_padded / 64;
  return w.k_major ? W4A16Strides{1, groups} : W4A16Strides{tiles_k, 1};
}

// Block tile families: rows of x per block 8 (kM8: x as the mma's B operand, weights as A), 16
// (through shared memory; kM16Swap: x as the B operand in two 8-row fragments; kM16Wide: 8
// warps, a block's K range split over two warp groups), 64, 128, and kGemv:
// 16 rows, the weights streamed from global memory straight into registers (decode, small M;
// w4a16_gemv.cu); kSlice16 / kSlice32 / kSlice64: up to 16 rows, a block streams a 16-, 32- or
// 64-row weight slice over all of K, so K is never split over blocks and `splits` is ignored
// (w4a16_slice.cu); the Wide forms: the same slice with 8 warps per block (long K, few blocks per
// SM); kWgmma128 / kWgmma256 (sm_90a only, w4a16_wgmma.cu): 128 / 256 rows of x x 128 weight
// rows per block (two / one an SM) on Hopper's warpgroup MMA with the dequantised weights as its
// register operand (split-K as the 64- and 128-row tiles).
enum class W4A16Tile {
  kM8,
  kM16,
  kM16Wide,
  kM64,
  kM128,
  kGemv,
  kM16Swap,
  kSlice16,
  kSlice32,
  kSlice16Wide,
  kSlice32Wide,
  kSlice64,
  kSlice64Wide,
  kWgmma128,
  kWgmma256
};

inline int w4a16_tile_rows(W4A16Tile tile) {
  switch (tile) {
    case W4A16Tile::kM8:
      return 8;
    case W4A16Tile::kM64:
      return 64;
    case W4A16Tile::kM128:
    case W4A16Tile::kWgmma128:
      return 128;
    case W4A16Tile::kWgmma256:
      return 256;
    default:
      return 16;
  }
}
inline constexpr int kW4A16TileCols = 128;

// x: [m, k] BF16 bits (row stride k, 16-byte aligned: the loads move 16-byte chunks, and the 64-
// and 128-row tiles read it through a TMA tensor map, encoded per call and reused while x, m
// and k stay the same); residual (may be null) and out: [m, n] BF16 bits.
// splits > 1 splits K over blocks that add into workspace (w4a16_workspace_bytes(m, n): must
// be all zero on entry and is left all zero; the last block of each output tile writes it
// out); splits == 1 needs no workspace.
// overlap: launch with programmatic dependent launch (sm_90+): the kernel's blocks may start while
// the previous kernel in the stream is still running and fetch their first weights early; they
// wait for it before touching x, residual, out or workspace, and then let the next kernel launch
// the same way (at most two kernels of a chain overlap). Safe after any kernel.
// wgmma_cluster_sum: the warpgroup-MMA tiles sum their K splits in a cluster where one fits
// (false: through the workspace; LinearOptions::wgmma_cluster_sum, nvfp4_linear.h).
inline std::size_t w4a16_workspace_bytes(std::int64_t m, std::int64_t n) {
  const std::int64_t tiles = ((n + kW4A16TileCols - 1) / kW4A16TileCols) * ((m + 7) / 8);
  return std::size_t(m * n + tiles) * 4;  // partial sums, then one arrival counter per tile
}

// Blocks of a tile family that fit on one SM at once (its register cap: __launch_bounds__), for
// the planner's grid sizes.
int w4a16_resident_blocks(W4A16Tile tile);
inline constexpr int kW4A16GemvBlocksPerSm = 2;  // the kGemv kernel's

cudaError_t w4a16_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                         const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                         int splits, float* workspace, cudaStream_t stream, bool overlap = false,
                         bool wgmma_cluster_sum = true);

// The kGemv kernel (w4a16_gemv.cu). Arguments as above, already validated.
cudaError_t w4a16_gemv_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                              const std::uint16_t* residual, std::uint16_t* out, int splits,
                              float* workspace, cudaStream_t stream, bool overlap = false);

// Tiles the planner never picks (nvfp4_linear.h): kGemv, kM16, kM16Wide and the 64-row slices.
// They live in nibble::kernels_dev, the library of such variants that only the kernel bench and
// the GPU tests link (issue 20, item 5): w4a16_linear forwards them there once
// w4a16_enable_dev_tiles() (w4a16_dev_tiles.h) has run, and answers cudaErrorNotSupported before.
inline bool w4a16_is_dev_tile(W4A16Tile tile) {
  return tile == W4A16Tile::kGemv || tile == W4A16Tile::kM16 || tile == W4A16Tile::kM16Wide ||
         tile == W4A16Tile::kSlice64 || tile == W4A16Tile::kSlice64Wide;
}
// The hook w4a16_enable_dev_tiles sets (w4a16_grouped.h: w4a16_set_dev_linear), and its call.
using W4A16DevLinear = cudaError_t (*)(const std::uint16_t* x, std::int64_t m,
                                       const W4A16DeviceWeight& w, const std::uint16_t* residual,
                                       std::uint16_t* out, W4A16Tile tile, int splits,
                                       float* workspace, cudaStream_t stream, bool overlap);
cudaError_t w4a16_run_dev_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                                 const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                                 int splits, float* workspace, cudaStream_t stream, bool overlap);

// The slice kernels (w4a16_slice.cu); w4a16_linear forwards to them. No workspace; m > 16 is
// cudaErrorInvalidValue, the other arguments are already validated.
cudaError_t w4a16_slice_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                               const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                               cudaStream_t stream, bool overlap = false);
int w4a16_slice_resident_blocks(W4A16Tile tile);

// Dynamic shared memory of one block of a slice tile at m rows (it grows with m).
int w4a16_slice_smem_bytes(W4A16Tile tile, std::int64_t m);
// k steps (64 columns) a block of a slice tile holds in its rings at once (warps x ring slots):
// a K of at most that many steps is requested whole at the kernel's start.
int w4a16_slice_ring_steps(W4A16Tile tile);
inline bool w4a16_is_slice(W4A16Tile tile) {
  switch (tile) {
    case W4A16Tile::kSlice16:
    case W4A16Tile::kSlice16Wide:
    case W4A16Tile::kSlice32:
    case W4A16Tile::kSlice32Wide:
    case W4A16Tile::kSlice64:
    case W4A16Tile::kSlice64Wide:
      return true;
    default:
      return false;
  }
}
// Weight rows a slice tile's block owns (its grid is n_padded / rows blocks).
inline int w4a16_slice_rows(W4A16Tile tile) {
  switch (tile) {
    case W4A16Tile::kSlice32:
    case W4A16Tile::kSlice32Wide:
      return 32;
    case W4A16Tile::kSlice64:
    case W4A16Tile::kSlice64Wide:
      return 64;
    default:
      return 16;
  }
}

// The warpgroup-MMA tiles (w4a16_wgmma.cu); w4a16_linear forwards to them (splits, workspace,
// overlap and cluster_sum as there). cudaErrorNotSupported unless w4a16_wgmma_supported(); the
// other arguments are already validated.
cudaError_t w4a16_wgmma_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                               const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                               int splits, float* workspace, cudaStream_t stream, bool overlap,
                               bool cluster_sum = true);
// The current device is sm_90 and the library holds the sm_90a image of the wgmma kernels.
bool w4a16_wgmma_supported();
int w4a16_wgmma_resident_blocks(W4A16Tile tile);
// The most (1, 1, splits) clusters of the tile's blocks the device holds at once: where a launch
// split `splits` ways sums its K splits in a cluster (2 <= splits <= 8), its output tiles run in
// waves of this many. 0 where that path is not taken (no wgmma, or no such cluster fits): the
// split-K sums then go through the workspace.
int w4a16_wgmma_max_clusters(W4A16Tile tile, int splits);
inline bool w4a16_is_wgmma(W4A16Tile tile) {
  return tile == W4A16Tile::kWgmma128 || tile == W4A16Tile::kWgmma256;
}

}  // namespace nibble::kernels
