// nibble::kernels_dev's slice shapes (w4a16_dev_launchers.h): the ones no planner picks.
#include "kernels/nvfp4/w4a16_dev_launchers.h"
#include "kernels/nvfp4/w4a16_slice_dense.cuh"
#include "kernels/nvfp4/w4a16_slice_grouped.cuh"

namespace nibble::kernels {

cudaError_t w4a16_dev_slice_linear(const std::uint16_t* x, std::int64_t m,
                                   const W4A16DeviceWeight& w, const std::uint16_t* residual,
                                   std::uint16_t* out, W4A16Tile tile, cudaStream_t stream,
                                   bool overlap) {
  if (m > kMaxRows) return cudaErrorInvalidValue;
  switch (tile) {
    case W4A16Tile::kSlice64:
      return launch_slice<Slice64>(x, m, w, residual, out, stream, overlap);
    case W4A16Tile::kSlice64Wide:
      return launch_slice<Slice64Wide>(x, m, w, residual, out, stream, overlap);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t w4a16_dev_grouped_slice_linear(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                           const MoeRowBlock* blocks, std::int64_t max_blocks,
                                           int block_rows, W4A16Tile tile, std::uint16_t* out,
                                           cudaStream_t stream) {
  if (block_rows < 1 || block_rows > kMaxRows) return cudaErrorInvalidValue;
  const auto run = [&](auto shape) {
    return launch_grouped_slice<decltype(shape)>(x, w, blocks, max_blocks, block_rows, out, stream);
  };
  switch (tile) {
    case W4A16Tile::kSlice16Wide:
      return run(Slice16Wide{});
    case W4A16Tile::kSlice32:
      return run(Slice32{});
    case W4A16Tile::kSlice32Wide:
      return run(Slice32Wide{});
    case W4A16Tile::kSlice64:
      return run(Slice64{});
    case W4A16Tile::kSlice64Wide:
      return run(Slice64Wide{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace nibble::kernels
