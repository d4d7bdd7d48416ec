#pragma once
// The GPU tests' error measure (METHOD.md): ||got - want|| / ||want|| over the finite outputs,
// with the count of outputs that are not finite (a poisoned output never written reads NaN).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/nvfp4/bf16.h"

namespace nibble::gpu_test {

struct RelativeError {
  double l2 = 0;               // INFINITY when any output is not finite
  std::size_t not_finite = 0;  // outputs that are NaN or infinite
};

// got: BF16 bits; want: the reference, element for element.
inline RelativeError relative_error(const std::vector<std::uint16_t>& got,
                                    const std::vector<double>& want) {
  double diff = 0, ref = 0;
  RelativeError e;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = nvfp4::bf16_to_float(got[i]);
    if (!std::isfinite(g)) {
      ++e.not_finite;
      continue;
    }
    diff += (g - want[i]) * (g - want[i]);
    ref += want[i] * want[i];
  }
  e.l2 = e.not_finite ? INFINITY : std::sqrt(diff / ref);
  return e;
}

}  // namespace nibble::gpu_test
