// The W4A16 entry points (w4a16_tile_kernels.cuh has the row-tile kernels): checks, then the
// slice, warpgroup or row-tile launch the tile names. The row tiles the planners never pick
// (kM16, kM16Wide, and every grouped form but kM64's) run from nibble::kernels_dev
// (w4a16_gemm_dev.cu), as kGemv does.
#include "kernels/nvfp4/w4a16_tile_kernels.cuh"

namespace nibble::kernels {

int w4a16_resident_blocks(W4A16Tile tile) {
  if (w4a16_is_slice(tile)) return w4a16_slice_resident_blocks(tile);
  if (w4a16_is_wgmma(tile)) return w4a16_wgmma_resident_blocks(tile);
  int blocks = kW4A16GemvBlocksPerSm;
  with_tile_shape(tile, [&](auto shape) { blocks = decltype(shape)::MIN_BLOCKS; });
  return blocks;
}

namespace {
std::atomic<W4A16DevLinear> dev_linear{nullptr};                 // set by nibble::kernels_dev
std::atomic<W4A16DevGroupedLinear> dev_grouped_linear{nullptr};  // likewise
}  // namespace

void w4a16_set_dev_linear(W4A16DevLinear launcher, W4A16DevGroupedLinear grouped) {
  dev_linear.store(launcher);
  dev_grouped_linear.store(grouped);
}

cudaError_t w4a16_run_dev_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                                 const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                                 int splits, float* workspace, cudaStream_t stream, bool overlap) {
  const W4A16DevLinear launcher = dev_linear.load();
  return launcher != nullptr
             ? launcher(x, m, w, residual, out, tile, splits, workspace, stream, overlap)
             : cudaErrorNotSupported;
}

cudaError_t w4a16_run_dev_grouped_linear(const std::uint16_t* x, std::int64_t rows,
                                         const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                         std::int64_t max_blocks, int block_rows, W4A16Tile tile,
                                         std::uint16_t* out, cudaStream_t stream) {
  const W4A16DevGroupedLinear launcher = dev_grouped_linear.load();
  return launcher != nullptr
             ? launcher(x, rows, w, blocks, max_blocks, block_rows, tile, out, stream)
             : cudaErrorNotSupported;
}

cudaError_t w4a16_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                         const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                         int splits, float* workspace, cudaStream_t stream, bool overlap,
                         bool wgmma_cluster_sum) {
  if (m < 0 || w.n <= 0 || w.k <= 0 || w.k % 16 != 0 || w.n_padded % kW4A16TileCols != 0 ||
      w.k_padded % kBk != 0 || w.n_padded < w.n || w.k_padded < w.k) {
    return cudaErrorInvalidValue;
  }
  // MXFP4 runs in the MoE's grouped kernels only (gpt-oss: its experts; the rest is BF16).
  if (w.format != nvfp4::W4A16Format::kNvfp4) return cudaErrorNotSupported;
  if (m == 0) return cudaSuccess;
  if (w4a16_is_dev_tile(tile)) {  // nibble::kernels_dev (w4a16_dev_tiles.h)
    return w4a16_run_dev_linear(x, m, w, residual, out, tile, splits, workspace, stream, overlap);
  }
  if (w4a16_is_slice(tile)) {
    return w4a16_slice_linear(x, m, w, residual, out, tile, stream, overlap);
  }
  if (w4a16_is_wgmma(tile)) {
    return w4a16_wgmma_linear(x, m, w, residual, out, tile, splits, workspace, stream, overlap,
                              wgmma_cluster_sum);
  }
  switch (tile) {  // the row tiles the planner picks (nvfp4_linear.h)
    case W4A16Tile::kM8:
      return launch<ShapeM8>(x, m, w, residual, out, splits, workspace, stream, overlap);
    case W4A16Tile::kM16Swap:
      return launch<ShapeM16Swap>(x, m, w, residual, out, splits, workspace, stream, overlap);
    case W4A16Tile::kM64:
      return launch<ShapeM64>(x, m, w, residual, out, splits, workspace, stream, overlap);
    case W4A16Tile::kM128:
      return launch<ShapeM128>(x, m, w, residual, out, splits, workspace, stream, overlap);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t w4a16_grouped_tile_linear(const std::uint16_t* x, std::int64_t rows,
                                      const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                      std::int64_t max_blocks, W4A16Tile tile, std::uint16_t* out,
                                      cudaStream_t stream) {
  // w4a16_grouped_linear sends the other row tiles to nibble::kernels_dev.
  if (tile != W4A16Tile::kM64) return cudaErrorInvalidValue;
  if (w.shape.format == nvfp4::W4A16Format::kMxfp4)
    return launch_grouped<TileMxfp4<ShapeM64>>(x, rows, w, blocks, max_blocks, out, stream);
  return launch_grouped<ShapeM64>(x, rows, w, blocks, max_blocks, out, stream);
}

cudaError_t w4a16_grouped_prepare() {
  // The production grouped forms (the dev ones set theirs at their first launch).
  for (const cudaError_t err : {w4a16_grouped_slice_prepare(), grouped_tile_attribute<ShapeM64>(),
                                grouped_tile_attribute<TileMxfp4<ShapeM64>>()}) {
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t w4a16_grouped_linear(const std::uint16_t* x, std::int64_t rows,
                                 const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                 std::int64_t max_blocks, int block_rows, W4A16Tile tile,
                                 std::uint16_t* out, cudaStream_t stream) {
  const W4A16DeviceWeight& s = w.shape;
  if (rows < 0 || rows > INT32_MAX || s.n <= 0 || s.k <= 0 || s.k % 16 != 0 ||
      s.n_padded % kW4A16TileCols != 0 || s.k_padded % kBk != 0 || s.n_padded < s.n ||
      s.k_padded < s.k || s.k >= (std::int64_t(1) << 23) || max_blocks < 0 || max_blocks > 65535 ||
      block_rows < 1 || w.table == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0 || max_blocks == 0) return cudaSuccess;
  const bool slice = w4a16_is_slice(tile);
  if (!slice &&
      (tile == W4A16Tile::kGemv || w4a16_is_wgmma(tile) || block_rows > w4a16_tile_rows(tile)))
    return cudaErrorInvalidValue;
  // The grouped forms the MoE planner takes (moe_experts.h); the others are nibble::kernels_dev's,
  // NVFP4 only.
  if (tile != W4A16Tile::kSlice16 && tile != W4A16Tile::kM64) {
    if (s.format != nvfp4::W4A16Format::kNvfp4) return cudaErrorNotSupported;
    return w4a16_run_dev_grouped_linear(x, rows, w, blocks, max_blocks, block_rows, tile, out,
                                        stream);
  }
  return slice ? w4a16_grouped_slice_linear(x, w, blocks, max_blocks, block_rows, tile, out, stream)
               : w4a16_grouped_tile_linear(x, rows, w, blocks, max_blocks, tile, out, stream);
}

}  // namespace nibble::kernels
