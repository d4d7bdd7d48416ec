#include "engine/backend/cuda/swiglu_block.h"

#include "kernels/layer/layer_ops.h"

namespace nibble::backend::cuda {

void run_swiglu(LinearRunner& linears, const DeviceMlp& mlp, const std::uint16_t* in,
                std::int64_t rows, const std::uint16_t* residual, std::uint16_t* out,
                std::uint16_t* projected, std::uint16_t* middle, cudaStream_t stream,
                const kernels::LayerOptions& options) {
  const std::int64_t width = mlp.width();
  if (mlp.fused) {
    linears.run(mlp.gate_up, in, rows, nullptr, projected);
    check(kernels::silu_mul_halves(projected, rows, width, middle, stream, options),
          "silu_mul_halves");
  } else {
    linears.run(mlp.gate, in, rows, nullptr, projected);
    linears.run(mlp.up, in, rows, nullptr, projected + rows * width);
    check(kernels::silu_mul(projected, projected + rows * width, rows * width, middle, stream,
                            options),
          "silu_mul");
  }
  linears.run(mlp.down, middle, rows, residual, out);
}

}  // namespace nibble::backend::cuda
