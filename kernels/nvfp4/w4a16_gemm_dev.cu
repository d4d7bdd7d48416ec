// nibble::kernels_dev's row tiles (w4a16_dev_launchers.h): the ones no planner picks.
#include "kernels/nvfp4/w4a16_dev_launchers.h"
#include "kernels/nvfp4/w4a16_tile_kernels.cuh"

namespace nibble::kernels {

cudaError_t w4a16_dev_tile_linear(const std::uint16_t* x, std::int64_t m,
                                  const W4A16DeviceWeight& w, const std::uint16_t* residual,
                                  std::uint16_t* out, W4A16Tile tile, int splits, float* workspace,
                                  cudaStream_t stream, bool overlap) {
  switch (tile) {
    case W4A16Tile::kM16:
      return launch<ShapeM16>(x, m, w, residual, out, splits, workspace, stream, overlap);
    case W4A16Tile::kM16Wide:
      return launch<ShapeM16Wide>(x, m, w, residual, out, splits, workspace, stream, overlap);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t w4a16_dev_grouped_tile_linear(const std::uint16_t* x, std::int64_t rows,
                                          const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                          std::int64_t max_blocks, W4A16Tile tile,
                                          std::uint16_t* out, cudaStream_t stream) {
  switch (tile) {
    case W4A16Tile::kM8:
      return launch_grouped<ShapeM8>(x, rows, w, blocks, max_blocks, out, stream);
    case W4A16Tile::kM16Swap:
      return launch_grouped<ShapeM16Swap>(x, rows, w, blocks, max_blocks, out, stream);
    case W4A16Tile::kM16:
      return launch_grouped<ShapeM16>(x, rows, w, blocks, max_blocks, out, stream);
    case W4A16Tile::kM16Wide:
      return launch_grouped<ShapeM16Wide>(x, rows, w, blocks, max_blocks, out, stream);
    default:  // kM128's grouped form is not built (launch_grouped)
      return cudaErrorInvalidValue;
  }
}

}  // namespace nibble::kernels
