#pragma once
// Shared by nibble-kernel-bench's parts: fail-fast CUDA / cuBLAS checks, graph-replay timing,
// random BF16 fills and random NVFP4 weights.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/w4a16_gemm.h"
#include "kernels/nvfp4/w4a16_layout.h"

#define CHECK_CUDA(expr)                                                   \
  do {                                                                     \
    const cudaError_t e_ = (expr);                                         \
    if (e_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(e_));                                \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)
#define CHECK_CUBLAS(expr)                                                                         \
  do {                                                                                             \
    const cublasStatus_t s_ = (expr);                                                              \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s:%d: %s -> cublas status %d\n", __FILE__, __LINE__, #expr, int(s_)); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace nibble::bench {

inline constexpr std::size_t kRotateBytes = 256ull << 20;  // > 5x H100's 50 MB L2

// Time per call of f(i, stream): `calls` calls (i = 0, 1, ...: rotating weights) are captured
// in one CUDA graph, so launch gaps stay out of the numbers; the graph is replayed `reps` times
// between events after 2 warm-up replays; median replay time / calls, in us.
template <class F>
double median_us(int reps, cudaStream_t stream, F f, int calls = 20) {
  f(0, stream);  // outside the capture: one-time attribute calls, lazy module loading
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) f(i, stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 2; ++i) CHECK_CUDA(cudaGraphLaunch(exec, stream));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms * 1000.0 / calls);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

inline void fill_random_bf16(std::uint16_t* dev, std::size_t count, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> h(count);
  for (auto& v : h) v = nibble::nvfp4::float_to_bf16(normal(rng));
  CHECK_CUDA(cudaMemcpy(dev, h.data(), count * 2, cudaMemcpyHostToDevice));
}

// Random NVFP4 weight [n, k]: E2M1 pairs [n, k/2] and E4M3 block scales [n, k/16] in 0x28..0x48
// (no zero blocks, so no block's codes are dropped by the repack).
struct RandomNvfp4 {
  std::vector<std::uint8_t> packed, scales;
};
inline RandomNvfp4 random_nvfp4(std::int64_t n, std::int64_t k, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> byte(0, 255), scale(0x28, 0x48);
  RandomNvfp4 r{std::vector<std::uint8_t>(std::size_t(n * k / 2)),
                std::vector<std::uint8_t>(std::size_t(n * k / 16))};
  for (auto& b : r.packed) b = std::uint8_t(byte(rng));
  for (auto& b : r.scales) b = std::uint8_t(scale(rng));
  return r;
}

// A device copy of a repacked weight; its two allocations are appended to `allocations`.
inline kernels::W4A16DeviceWeight upload_w4a16(const nvfp4::W4A16Weight& w,
                                               std::vector<void*>& allocations) {
  std::uint8_t *tiles = nullptr, *scales = nullptr;
  CHECK_CUDA(cudaMalloc(&tiles, w.tiles.size()));
  allocations.push_back(tiles);
  CHECK_CUDA(cudaMalloc(&scales, w.scales.size()));
  allocations.push_back(scales);
  CHECK_CUDA(cudaMemcpy(tiles, w.tiles.data(), w.tiles.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(scales, w.scales.data(), w.scales.size(), cudaMemcpyHostToDevice));
  return {tiles, scales, w.n, w.k, w.n_padded, w.k_padded, w.global_factor, w.k_major, w.format};
}

}  // namespace nibble::bench
