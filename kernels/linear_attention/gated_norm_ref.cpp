#include "kernels/linear_attention/gated_norm_ref.h"

#include <cmath>
#include <stdexcept>

namespace nibble::kernels {

void gated_rms_norm_ref(std::int64_t rows, int dim, std::span<const float> x,
                        std::span<const float> z, std::span<const float> weight, float eps,
                        std::span<float> y) {
  const auto D = std::size_t(dim), n = std::size_t(rows) * D;
  if (rows < 0 || dim < 1 || x.size() != n || z.size() != n || y.size() != n || weight.size() != D)
    throw std::invalid_argument("gated RMSNorm: array sizes do not match");
  for (std::size_t r = 0; r < std::size_t(rows); ++r) {
    double squares = 0.0;
    for (std::size_t i = 0; i < D; ++i) squares += double(x[r * D + i]) * x[r * D + i];
    const double scale = 1.0 / std::sqrt(squares / double(D) + eps);
    for (std::size_t i = 0; i < D; ++i) {
      const double g = z[r * D + i];
      y[r * D + i] = float(weight[i] * (x[r * D + i] * scale) * (g / (1.0 + std::exp(-g))));
    }
  }
}

}  // namespace nibble::kernels
