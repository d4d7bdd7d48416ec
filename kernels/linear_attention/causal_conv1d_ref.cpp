#include "kernels/linear_attention/causal_conv1d_ref.h"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace nibble::kernels {

void causal_conv1d_ref(std::int64_t tokens, int channels, int kernel, std::span<const float> x,
                       std::span<const float> weight, std::span<float> state, std::span<float> out,
                       bool silu) {
  const auto C = std::size_t(channels), W = std::size_t(kernel - 1);
  if (tokens < 0 || channels < 1 || kernel < 1 || x.size() != std::size_t(tokens) * C ||
      out.size() != x.size() || weight.size() != C * std::size_t(kernel) || state.size() != W * C)
    throw std::invalid_argument("causal conv1d: array sizes do not match");
  // The window: the state's rows, then this call's tokens.
  std::vector<float> window(state.begin(), state.end());
  window.insert(window.end(), x.begin(), x.end());
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::size_t c = 0; c < C; ++c) {
      double sum = 0.0;
      for (std::size_t i = 0; i <= W; ++i)
        sum += double(weight[c * (W + 1) + i]) * window[(std::size_t(t) + i) * C + c];
      out[std::size_t(t) * C + c] = float(silu ? sum / (1.0 + std::exp(-sum)) : sum);
    }
  }
  const std::size_t rows = window.size() / C;
  for (std::size_t r = 0; r < W; ++r)
    for (std::size_t c = 0; c < C; ++c) state[r * C + c] = window[(rows - W + r) * C + c];
}

}  // namespace nibble::kernels
