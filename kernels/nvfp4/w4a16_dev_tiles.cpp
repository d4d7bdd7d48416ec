#include "kernels/nvfp4/w4a16_dev_tiles.h"

#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {
namespace {

cudaError_t dev_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                       const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                       int splits, float* workspace, cudaStream_t stream, bool overlap) {
  if (tile != W4A16Tile::kGemv) return cudaErrorInvalidValue;
  return w4a16_gemv_linear(x, m, w, residual, out, splits, workspace, stream, overlap);
}

}  // namespace

void w4a16_enable_dev_tiles() {
  w4a16_set_dev_linear(dev_linear);
}

}  // namespace nibble::kernels
