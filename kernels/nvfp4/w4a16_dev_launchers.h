#pragma once
// The launchers of nibble::kernels_dev's W4A16 variants (w4a16_dev_tiles.h), one per kernel file:
// w4a16_dev_tiles.cpp routes the hooks' calls to them. Arguments as w4a16_linear's and
// w4a16_grouped_linear's, already checked there; a tile a launcher does not hold is
// cudaErrorInvalidValue.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/nvfp4/w4a16_gemm.h"
#include "kernels/nvfp4/w4a16_grouped.h"

namespace nibble::kernels {

// w4a16_slice_dev.cu: kSlice64, kSlice64Wide; grouped: every slice but kSlice16.
cudaError_t w4a16_dev_slice_linear(const std::uint16_t* x, std::int64_t m,
                                   const W4A16DeviceWeight& w, const std::uint16_t* residual,
                                   std::uint16_t* out, W4A16Tile tile, cudaStream_t stream,
                                   bool overlap);
cudaError_t w4a16_dev_grouped_slice_linear(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                           const MoeRowBlock* blocks, std::int64_t max_blocks,
                                           int block_rows, W4A16Tile tile, std::uint16_t* out,
                                           cudaStream_t stream);

// w4a16_gemm_dev.cu: kM16, kM16Wide; grouped: kM8, kM16Swap, kM16, kM16Wide.
cudaError_t w4a16_dev_tile_linear(const std::uint16_t* x, std::int64_t m,
                                  const W4A16DeviceWeight& w, const std::uint16_t* residual,
                                  std::uint16_t* out, W4A16Tile tile, int splits, float* workspace,
                                  cudaStream_t stream, bool overlap);
cudaError_t w4a16_dev_grouped_tile_linear(const std::uint16_t* x, std::int64_t rows,
                                          const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                          std::int64_t max_blocks, W4A16Tile tile,
                                          std::uint16_t* out, cudaStream_t stream);

}  // namespace nibble::kernels
