// The mma.sync ceiling kernel (mma_ceiling.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/nvfp4/w4a16_device.cuh"
#include "tools/kernel-bench/mma_ceiling.h"

namespace nibble::bench {
namespace {

// Independent accumulators per warp: enough mma.sync in flight to cover the tensor pipe's
// latency from one warp.
constexpr int kChains = 8;
constexpr int kIters = 16384;  // ~3 ms per launch at ~475 TFLOP/s on 132 SMs, 16 warps each

__global__ void mma_loop_kernel(int iters, unsigned* sink) {
  const unsigned lane = threadIdx.x % 32;
  // Small non-zero BF16 operands that differ per lane (never zeros: they can run faster); the
  // sums stay finite over the whole loop.
  std::uint32_t a[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = 0x3C003C00u + (((lane + i) & 7u) * 0x00010001u);
  const std::uint32_t b0 = 0x3A803A80u + (lane & 3u), b1 = 0x3A803A80u + ((lane >> 2) & 3u);
  float acc[kChains][4];
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[c][e] = 0.0f;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) kernels::mma_bf16(acc[c], a, b0, b1);
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  if (sum == -1.0f) *sink = 1u;  // impossible: every product is positive
}

}  // namespace

cudaError_t mma_sync_ceiling(int sm_count, int warps_per_sm, int reps, unsigned* sink,
                             cudaStream_t stream, double* tflops) {
  if (sm_count < 1 || warps_per_sm < 1 || warps_per_sm > 32 || reps < 1 || tflops == nullptr) {
    return cudaErrorInvalidValue;
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t err = cudaEventCreate(&start);
  if (err == cudaSuccess) err = cudaEventCreate(&stop);
  std::vector<double> ms;
  for (int r = 0; r <= reps && err == cudaSuccess; ++r) {  // r == 0: warm-up
    err = cudaEventRecord(start, stream);
    if (err != cudaSuccess) break;
    mma_loop_kernel<<<sm_count, warps_per_sm * 32, 0, stream>>>(kIters, sink);
    if ((err = cudaGetLastError()) != cudaSuccess) break;
    if ((err = cudaEventRecord(stop, stream)) != cudaSuccess) break;
    if ((err = cudaEventSynchronize(stop)) != cudaSuccess) break;
    float t = 0.0f;
    if ((err = cudaEventElapsedTime(&t, start, stop)) != cudaSuccess) break;
    if (r > 0) ms.push_back(t);
  }
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  if (err != cudaSuccess) return err;
  std::sort(ms.begin(), ms.end());
  const double flops =
      double(sm_count) * warps_per_sm * double(kIters) * kChains * 2.0 * 16 * 8 * 16;
  *tflops = flops / (ms[ms.size() / 2] * 1e-3) / 1e12;
  return cudaSuccess;
}

}  // namespace nibble::bench
