// test_gated_deltanet_gpu --bench (gated_deltanet_bench.h): Qwen3-Next-80B's linear-attention
// layer timed on the device, decode steps and prompts of both forms.
#include "tests/gpu/gated_deltanet_bench.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "kernels/linear_attention/gated_deltanet.h"
#include "kernels/linear_attention/gated_deltanet_chunked.h"
#include "tests/gpu/bf16_checks.h"
#include "tests/gpu/gpu_check_support.h"

namespace nibble::gpu_test {
namespace {

using kernels::GatedDeltaNetShape;

template <typename T>
using Device = DeviceArray<T>;

// Mean µs of `run` over `repeats` back-to-back launches on the default stream, after one warm-up,
// timed with device events.
template <typename Run>
double mean_us(const Run& run, int repeats) {
  run();
  cudaEvent_t e0, e1;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e0));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e1));
  NIBBLE_CUDA_CHECK(cudaEventRecord(e0));
  for (int i = 0; i < repeats; ++i) run();
  NIBBLE_CUDA_CHECK(cudaEventRecord(e1));
  NIBBLE_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  NIBBLE_CUDA_CHECK(cudaEventDestroy(e0));
  NIBBLE_CUDA_CHECK(cudaEventDestroy(e1));
  return 1e3 * double(ms) / repeats;
}

// Device-to-device copy, bytes read + written a second.
double copy_rate() {
  const std::size_t n = std::size_t(1) << 30;
  Device<std::uint8_t> a(n), b(n);
  NIBBLE_CUDA_CHECK(cudaMemset(a.ptr, 1, n));
  const double us = mean_us(
      [&] { NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.ptr, a.ptr, n, cudaMemcpyDeviceToDevice)); }, 10);
  return 2.0 * double(n) / (us * 1e-6);
}

// cuBLAS's BF16 GEMM (FP32 accumulate) at 4096^3 on random operands (zeros run faster than real
// data: METHOD.md), FLOP a second: the tensor-core ceiling.
double cublas_bf16_rate(std::mt19937_64& rng) {
  constexpr int n = 4096;
  Device<std::uint16_t> a(std::size_t(n) * n), b(std::size_t(n) * n), c(std::size_t(n) * n);
  a.upload(random_bf16(rng, a.n, 1.0f));
  b.upload(random_bf16(rng, b.n, 1.0f));
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw CudaFailure("cublasCreate failed");
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&] {
    if (cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.ptr, CUDA_R_16BF, n, b.ptr,
                     CUDA_R_16BF, n, &zero, c.ptr, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      throw CudaFailure("cublasGemmEx failed");
  };
  const double us = mean_us(gemm, 10);
  cublasDestroy(handle);
  return 2.0 * double(n) * n * n / (us * 1e-6);
}

// Decode: 36 layers, each its own state pool, one graph of the 36 launches replayed.
void bench_decode(const GatedDeltaNetShape& shape, const kernels::GatedDeltaNetDeviceParams& params,
                  const std::vector<std::uint16_t>& conv_w, double copy, std::mt19937_64& rng) {
  constexpr int kLayers = 36;
  for (const int rows : {1, 4, 8, 32}) {
    const auto state_bytes = std::size_t(shape.heads.state_floats()) * 4 * std::size_t(rows);
    const auto conv_bytes = std::size_t(shape.conv_state_floats()) * 4 * std::size_t(rows);
    std::vector<std::unique_ptr<Device<float>>> states, convs;
    for (int l = 0; l < kLayers; ++l) {
      states.push_back(std::make_unique<Device<float>>(state_bytes / 4));
      convs.push_back(std::make_unique<Device<float>>(conv_bytes / 4));
      NIBBLE_CUDA_CHECK(cudaMemset(states.back()->ptr, 0, state_bytes));
      NIBBLE_CUDA_CHECK(cudaMemset(convs.back()->ptr, 0, conv_bytes));
    }
    std::vector<kernels::GatedDeltaNetRow> host_rows;
    for (int r = 0; r < rows; ++r) host_rows.push_back({r, r, 1});
    Device<kernels::GatedDeltaNetRow> d_rows(host_rows.size());
    d_rows.upload(host_rows);
    const auto qkvz = random_bf16(rng, std::size_t(rows * shape.qkvz_width()), 1.0f);
    const auto ba = random_bf16(rng, std::size_t(rows * shape.ba_width()), 1.0f);
    Device<std::uint16_t> d_qkvz(qkvz.size()), d_ba(ba.size()),
        d_out(std::size_t(rows * shape.value_dim()));
    d_qkvz.upload(qkvz);
    d_ba.upload(ba);
    cudaStream_t stream;
    NIBBLE_CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    NIBBLE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < kLayers; ++l)
      NIBBLE_CUDA_CHECK(kernels::gated_deltanet_mix(shape, d_rows.ptr, rows, d_qkvz.ptr, d_ba.ptr,
                                                    params, {convs[l]->ptr, states[l]->ptr},
                                                    d_out.ptr, stream));
    NIBBLE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    NIBBLE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    NIBBLE_CUDA_CHECK(cudaGraphLaunch(exec, stream));  // warm-up
    cudaEvent_t e0, e1;
    NIBBLE_CUDA_CHECK(cudaEventCreate(&e0));
    NIBBLE_CUDA_CHECK(cudaEventCreate(&e1));
    constexpr int kReplays = 20;
    NIBBLE_CUDA_CHECK(cudaEventRecord(e0, stream));
    for (int i = 0; i < kReplays; ++i) NIBBLE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    NIBBLE_CUDA_CHECK(cudaEventRecord(e1, stream));
    NIBBLE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double us = 1e3 * double(ms) / (kReplays * kLayers);
    const double bytes = 2.0 * double(state_bytes + conv_bytes) + double(conv_w.size() * 2) +
                         double((qkvz.size() + ba.size()) * 2 + d_out.n * 2);
    std::printf("decode rows %2d: %7.2f us a layer, %6.2f MB moved, %5.1f%% of copy\n", rows, us,
                bytes / 1e6, 100.0 * bytes / (us * 1e-6) / copy);
    NIBBLE_CUDA_CHECK(cudaGraphExecDestroy(exec));
    NIBBLE_CUDA_CHECK(cudaGraphDestroy(graph));
    NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

// Prompts: one row of T tokens through each form (the recurrent kernel alone, the chunked form
// alone), µs a layer averaged over repeats, the recurrent form's time over the chunked one's (the
// dispatcher takes the chunked form from kGatedDeltaChunkedMinTokens on: set it where the ratio
// passes 1). The chunked form's % of two ceilings: the bytes it must move (qkvz, ba and out, the
// state read and written) at the copy rate, and its matmul FLOPs at cuBLAS's BF16 rate.
void bench_prompts(const GatedDeltaNetShape& shape,
                   const kernels::GatedDeltaNetDeviceParams& params, double copy, double gemm,
                   std::mt19937_64& rng) {
  const int C = kernels::kGatedDeltaChunk, Dk = shape.heads.k_dim, Dv = shape.heads.v_dim;
  std::printf(
      "prompt tokens | recurrent us | chunked us | recurrent / chunked | chunked: %% of "
      "copy (bytes) | %% of cuBLAS BF16 (FLOPs)\n");
  for (const int tokens : {8, 16, 24, 32, 64, 256, 1024, 8192}) {
    const auto T = std::size_t(tokens);
    const auto qkvz = random_bf16(rng, T * std::size_t(shape.qkvz_width()), 1.0f);
    const auto ba = random_bf16(rng, T * std::size_t(shape.ba_width()), 1.0f);
    Device<std::uint16_t> d_qkvz(qkvz.size()), d_ba(ba.size()),
        d_out(T * std::size_t(shape.value_dim()));
    d_qkvz.upload(qkvz);
    d_ba.upload(ba);
    Device<float> conv(std::size_t(shape.conv_state_floats())),
        state(std::size_t(shape.heads.state_floats()));
    NIBBLE_CUDA_CHECK(cudaMemset(conv.ptr, 0, conv.n * 4));
    NIBBLE_CUDA_CHECK(cudaMemset(state.ptr, 0, state.n * 4));
    const std::size_t work_bytes = kernels::gated_deltanet_chunked_workspace_bytes(shape, tokens);
    Device<std::uint8_t> work(work_bytes);
    Device<kernels::GatedDeltaNetRow> d_row(1);
    d_row.upload({kernels::GatedDeltaNetRow{0, 0, tokens}});
    auto recurrent = [&] {
      NIBBLE_CUDA_CHECK(kernels::gated_deltanet_mix(shape, d_row.ptr, 1, d_qkvz.ptr, d_ba.ptr,
                                                    params, {conv.ptr, state.ptr}, d_out.ptr,
                                                    nullptr));
    };
    auto chunked = [&] {
      NIBBLE_CUDA_CHECK(kernels::gated_deltanet_mix_chunked(
          shape, d_row.ptr, 1, tokens, 1, d_qkvz.ptr, d_ba.ptr, params, {conv.ptr, state.ptr},
          {work.ptr, work_bytes}, d_out.ptr, nullptr));
    };
    const int repeats = std::clamp(16384 / tokens, 2, 50);
    const double us_recurrent = mean_us(recurrent, repeats), us_chunked = mean_us(chunked, repeats);
    const double bytes =
        double((qkvz.size() + ba.size() + d_out.n) * 2) + 2.0 * 4.0 * double(state.n + conv.n);
    const double chunks = double((tokens + C - 1) / C) * shape.heads.v_heads;
    const double flops = chunks * (2.0 * C * C * (3.0 * Dk + 2.0 * Dv) + 6.0 * C * double(Dk) * Dv);
    std::printf("%13d | %12.1f | %10.1f | %19.2f | %27.1f | %25.1f\n", tokens, us_recurrent,
                us_chunked, us_recurrent / us_chunked, 100.0 * bytes / (us_chunked * 1e-6) / copy,
                100.0 * flops / (us_chunked * 1e-6) / gemm);
  }
}

// Verify rows (speculative decoding) of a token and 4 drafts, with and without snapshots
// (max_snapshots 5 or 0, the same rows): what keeping the state after each token adds to a verify
// step's layer. 20 eager launches back to back, one layer.
void bench_verify_snapshots(const GatedDeltaNetShape& shape,
                            const kernels::GatedDeltaNetDeviceParams& params,
                            std::mt19937_64& rng) {
  for (const int rows : {1, 8}) {
    constexpr int kTokens = 5, kLaunches = 20;
    const auto state_n = std::size_t(shape.heads.state_floats()) * std::size_t(rows);
    const auto conv_n = std::size_t(shape.conv_state_floats()) * std::size_t(rows);
    Device<float> state(state_n), conv(conv_n), snap_state(state_n * kTokens),
        snap_conv(conv_n * kTokens);
    NIBBLE_CUDA_CHECK(cudaMemset(state.ptr, 0, state_n * 4));
    NIBBLE_CUDA_CHECK(cudaMemset(conv.ptr, 0, conv_n * 4));
    std::vector<kernels::GatedDeltaNetRow> host_rows;
    for (int r = 0; r < rows; ++r) host_rows.push_back({r, r * kTokens, kTokens, 1});
    Device<kernels::GatedDeltaNetRow> d_rows(host_rows.size());
    d_rows.upload(host_rows);
    const auto qkvz = random_bf16(rng, std::size_t(rows * kTokens * shape.qkvz_width()), 1.0f);
    const auto ba = random_bf16(rng, std::size_t(rows * kTokens * shape.ba_width()), 1.0f);
    Device<std::uint16_t> d_qkvz(qkvz.size()), d_ba(ba.size()),
        d_out(std::size_t(rows * kTokens * shape.value_dim()));
    d_qkvz.upload(qkvz);
    d_ba.upload(ba);
    double us[2] = {0, 0};
    for (const int keep : {0, 1}) {
      kernels::GatedDeltaNetDeviceState st{conv.ptr, state.ptr};
      if (keep) st = {conv.ptr, state.ptr, snap_conv.ptr, snap_state.ptr, kTokens};
      auto launch = [&] {
        NIBBLE_CUDA_CHECK(kernels::gated_deltanet_mix(shape, d_rows.ptr, rows, d_qkvz.ptr, d_ba.ptr,
                                                      params, st, d_out.ptr, nullptr));
      };
      us[keep] = mean_us(launch, kLaunches);
    }
    std::printf(
        "verify rows %d x %d tokens: %7.2f us a layer without snapshots, %7.2f with (%.2f MB of "
        "snapshots written)\n",
        rows, kTokens, us[0], us[1], double((state_n + conv_n) * kTokens * 4) / 1e6);
  }
}

}  // namespace

void run_gated_deltanet_bench() {
  GatedDeltaNetShape shape;
  shape.heads = {16, 32, 128, 128};
  shape.conv_kernel = 4;
  std::mt19937_64 rng(1);
  const double copy = copy_rate();
  const double gemm = cublas_bf16_rate(rng);
  const auto conv_w = random_bf16(rng, std::size_t(shape.conv_dim() * 4), 0.5f);
  std::vector<float> ones(32, 1.0f), norm(128, 1.0f);
  Device<std::uint16_t> d_conv_w(conv_w.size());
  Device<float> d_A(32), d_dt(32), d_norm(128);
  d_conv_w.upload(conv_w);
  d_A.upload(ones);
  d_dt.upload(ones);
  d_norm.upload(norm);
  const kernels::GatedDeltaNetDeviceParams params{d_conv_w.ptr, d_A.ptr, d_dt.ptr, d_norm.ptr,
                                                  1e-6f};
  std::printf(
      "Gated DeltaNet, Qwen3-Next-80B layer (16/32 heads, 128 x 128, conv 4); copy %.0f "
      "GB/s (read + write), cuBLAS BF16 %.0f TFLOP/s\n",
      copy / 1e9, gemm / 1e12);
  bench_decode(shape, params, conv_w, copy, rng);
  bench_verify_snapshots(shape, params, rng);
  bench_prompts(shape, params, copy, gemm, rng);
}

}  // namespace nibble::gpu_test
