#pragma once
// The kernel reference tests' error measure: ||got - want|| / ||want|| in double.
#include <algorithm>
#include <cmath>
#include <vector>

namespace nibble::kernels::testing {

inline double relative_l2(const std::vector<float>& want, const std::vector<float>& got) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (double(want[i]) - got[i]) * (double(want[i]) - got[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

}  // namespace nibble::kernels::testing
