#include "kernels/nvfp4/w4a16_dev_tiles.h"

#include "kernels/nvfp4/w4a16_dev_launchers.h"
#include "kernels/nvfp4/w4a16_gemm.h"
#include "kernels/nvfp4/w4a16_grouped.h"

namespace nibble::kernels {
namespace {

cudaError_t dev_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                       const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                       int splits, float* workspace, cudaStream_t stream, bool overlap) {
  if (tile == W4A16Tile::kGemv)
    return w4a16_gemv_linear(x, m, w, residual, out, splits, workspace, stream, overlap);
  if (w4a16_is_slice(tile))
    return w4a16_dev_slice_linear(x, m, w, residual, out, tile, stream, overlap);
  return w4a16_dev_tile_linear(x, m, w, residual, out, tile, splits, workspace, stream, overlap);
}

cudaError_t dev_grouped_linear(const std::uint16_t* x, std::int64_t rows,
                               const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                               std::int64_t max_blocks, int block_rows, W4A16Tile tile,
                               std::uint16_t* out, cudaStream_t stream) {
  if (w4a16_is_slice(tile)) {
    return w4a16_dev_grouped_slice_linear(x, w, blocks, max_blocks, block_rows, tile, out, stream);
  }
  return w4a16_dev_grouped_tile_linear(x, rows, w, blocks, max_blocks, tile, out, stream);
}

}  // namespace

void w4a16_enable_dev_tiles() {
  w4a16_set_dev_linear(dev_linear, dev_grouped_linear);
}

}  // namespace nibble::kernels
