#pragma once
// What the layer-kernel GPU tests share: fresh random BF16 inputs, and one check line per output
// (relative L2 against an FP64 reference, the count of outputs left unwritten or not finite).
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/nvfp4/bf16.h"
#include "tests/gpu/gpu_check_support.h"
#include "tests/gpu/relative_error.h"

namespace nibble::gpu_test {

// n BF16 values drawn from N(mean, sigma).
inline std::vector<std::uint16_t> random_bf16(std::mt19937_64& rng, std::size_t n, float sigma,
                                              float mean = 0.0f) {
  std::normal_distribution<float> normal(mean, sigma);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = nvfp4::float_to_bf16(normal(rng));
  return v;
}

// PASS when got (BF16 bits) is within `tolerance` relative L2 of want, every output finite.
inline void record_relative_l2(Results& results, const std::string& name,
                               const std::vector<std::uint16_t>& got,
                               const std::vector<double>& want, double tolerance) {
  const RelativeError e = relative_error(got, want);
  results.record(
      e.l2 < tolerance, name,
      "relative L2 " + std::to_string(e.l2) + ", " + std::to_string(e.not_finite) + " not finite");
}

}  // namespace nibble::gpu_test
