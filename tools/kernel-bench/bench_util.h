#pragma once
// Shared by nibble-kernel-bench's parts: fail-fast CUDA / cuBLAS checks, graph-replay timing and
// random BF16 fills.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/nvfp4/bf16.h"

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

}  // namespace nibble::bench
