#pragma once
// The CPU references' softmax, one definition for the engine's CPU backend (cpu::softmax) and the
// kernels' references (moe_route_ref), so that both normalise alike: exp in float, the sum in
// double.
#include <algorithm>
#include <cmath>
#include <span>

namespace nibble::kernels {

inline void softmax_ref(std::span<float> x) {
  const float max = *std::max_element(x.begin(), x.end());
  double sum = 0.0;
  for (auto& v : x) {
    v = std::exp(v - max);
    sum += v;
  }
  for (auto& v : x) v = float(v / sum);
}

}  // namespace nibble::kernels
