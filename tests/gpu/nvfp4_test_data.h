#pragma once
// What the NVFP4 and MoE GPU tests share: an owning device buffer (upload, download, NaN poison),
// a host loop over all hardware threads for the CPU references, random NVFP4 weights (every code,
// zero, negative and -0 block scales) and the relative L2 error against a reference.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "kernels/nvfp4/nvfp4_ref.h"
#include "tests/gpu/gpu_check_support.h"

namespace nibble::gpu_test {

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t count = 0;
  explicit DeviceBuffer(std::size_t n) : count(n) {
    NIBBLE_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(1, n) * sizeof(T)));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& v) {
    NIBBLE_CUDA_CHECK(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(count);
    NIBBLE_CUDA_CHECK(cudaMemcpy(v.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  void poison() { NIBBLE_CUDA_CHECK(cudaMemset(ptr, 0xFF, count * sizeof(T))); }
};

// Runs f(begin, end) over [0, n) on all hardware threads.
template <class F>
void parallel_for(std::int64_t n, F f) {
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  const std::int64_t per = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const std::int64_t b = t * per, e = std::min(n, b + per);
    if (b < e) pool.emplace_back([=] { f(b, e); });
  }
  for (auto& th : pool) th.join();
}

inline nvfp4::QuantizedMatrix random_weight(std::mt19937_64& rng, std::int64_t n, std::int64_t k) {
  nvfp4::QuantizedMatrix q;
  q.rows = n;
  q.cols = k;
  q.packed.resize(std::size_t(n * k / 2));
  q.scales.resize(std::size_t(n * k / 16));
  std::uniform_int_distribution<int> byte(0, 255), scale_code(0x18, 0x60), roll(0, 99);
  for (auto& b : q.packed) b = std::uint8_t(byte(rng));
  for (auto& s : q.scales) {
    const int r = roll(rng);
    s = r < 2 ? 0 : std::uint8_t(scale_code(rng));
    if (r == 1 || r >= 95) s |= 0x80;  // -0 and negative scales: the repack folds the sign
  }
  std::uniform_real_distribution<float> gf(-8.0f, -2.0f);
  q.global_factor = std::exp2(gf(rng));
  return q;
}

// ||got - ref|| / ||ref||; infinity when got holds a NaN or an infinity (an unwritten, poisoned
// output).
inline double relative_error(const std::vector<double>& ref, const std::vector<double>& got) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::isfinite(num) && den > 0.0 ? std::sqrt(num / den) : (num == 0.0 ? 0.0 : INFINITY);
}

}  // namespace nibble::gpu_test
