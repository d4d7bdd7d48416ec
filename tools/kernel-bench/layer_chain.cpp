// Chained timing of the Llama-3.1-8B linear layer set (layer_chain.h).
#include "tools/kernel-bench/layer_chain.h"

#include <array>
#include <random>

#include "kernels/nvfp4/w4a16_layout.h"
#include "tools/kernel-bench/bench_util.h"
#include "tools/kernel-bench/read_ceiling.h"

namespace nibble::bench {
namespace {

struct LayerShape {
  std::int64_t k, n;
};
constexpr std::array<LayerShape, 4> kLlamaLayers = {
    {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}}};  // qkv, o, gate_up, down

// Device memory freed at scope exit.
struct Allocations {
  std::vector<void*> blocks;
  template <class T>
  T* get(std::size_t bytes) {
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, bytes));
    blocks.push_back(p);
    return static_cast<T*>(p);
  }
  ~Allocations() {
    for (void* p : blocks) cudaFree(p);
  }
};

// Random BF16 values, a 1 Mi-element pattern repeated: GEMM speed does not depend on the values,
// and normal samples for the whole BF16 set would take seconds per run.
void fill_repeated_random_bf16(std::uint16_t* dev, std::size_t count, std::mt19937_64& rng) {
  const std::size_t chunk = std::min<std::size_t>(count, std::size_t(1) << 20);
  std::uint16_t* pattern = nullptr;
  CHECK_CUDA(cudaMalloc(&pattern, chunk * 2));
  fill_random_bf16(pattern, chunk, rng);
  for (std::size_t at = 0; at < count; at += chunk) {
    CHECK_CUDA(
        cudaMemcpy(dev + at, pattern, std::min(chunk, count - at) * 2, cudaMemcpyDeviceToDevice));
  }
  CHECK_CUDA(cudaFree(pattern));
}

}  // namespace

std::vector<LayerChainTimes> time_llama_chain(const std::vector<std::int64_t>& ms, int reps,
                                              const kernels::DeviceTraits& device,
                                              cublasHandle_t cublas, cudaStream_t stream,
                                              double* weight_bytes) {
  std::mt19937_64 rng(777);
  Allocations mem;
  std::int64_t max_m = 1;
  for (std::int64_t m : ms) max_m = std::max(max_m, m);
  double set_bytes = 0, bf16_set_bytes = 0;
  for (const LayerShape& s : kLlamaLayers) {
    set_bytes += double(s.n * s.k) / 2 + double(s.n * s.k) / 16;
    bf16_set_bytes += double(s.n * s.k) * 2;
  }
  *weight_bytes = set_bytes;
  const int copies = int(std::max(2.0, double(kRotateBytes) / set_bytes + 1));
  const int bf16_copies = int(std::max(2.0, double(kRotateBytes) / bf16_set_bytes + 1));

  // [copy][layer] weights; per layer one x and one out (a decode step's activations stay in L2).
  std::vector<std::array<kernels::W4A16DeviceWeight, 4>> nvfp4(static_cast<std::size_t>(copies));
  std::vector<std::array<std::uint16_t*, 4>> bf16(static_cast<std::size_t>(bf16_copies));
  std::array<std::uint16_t*, 4> xs{}, outs{};
  std::size_t ws_bytes = 0;
  for (std::size_t l = 0; l < kLlamaLayers.size(); ++l) {
    const auto [k, n] = kLlamaLayers[l];
    const auto [packed, scales] = random_nvfp4(n, k, rng);
    const auto w = nvfp4::repack_for_w4a16(packed, scales, n, k, 1e-3f);
    for (auto& copy : nvfp4) copy[l] = upload_w4a16(w, mem.blocks);
    for (auto& copy : bf16) {
      copy[l] = mem.get<std::uint16_t>(std::size_t(n * k * 2));
      fill_repeated_random_bf16(copy[l], std::size_t(n * k), rng);
    }
    xs[l] = mem.get<std::uint16_t>(std::size_t(max_m * k * 2));
    fill_random_bf16(xs[l], std::size_t(max_m * k), rng);
    outs[l] = mem.get<std::uint16_t>(std::size_t(max_m * n * 2));
    ws_bytes = std::max(ws_bytes, kernels::nvfp4_linear_workspace_bytes(max_m, n));
  }
  auto* workspace = mem.get<float>(ws_bytes);
  CHECK_CUDA(cudaMemset(workspace, 0, ws_bytes));
  auto* sink = mem.get<unsigned>(sizeof(unsigned));

  std::vector<LayerChainTimes> result;
  for (std::int64_t m : ms) {
    LayerChainTimes t;
    t.m = m;
    auto ours = [&](bool overlap) {
      return median_us(
          reps, stream,
          [&](int i, cudaStream_t st) {
            const auto& set = nvfp4[std::size_t(i % copies)];
            for (std::size_t l = 0; l < set.size(); ++l) {
              CHECK_CUDA(kernels::nvfp4_linear(xs[l], m, set[l], nullptr, outs[l], workspace,
                                               ws_bytes, device, st, overlap));
            }
          },
          10);
    };
    t.ours_us = ours(false);
    t.ours_overlap_us = ours(true);
    t.read_us = median_us(
        reps, stream,
        [&](int i, cudaStream_t st) {
          for (const auto& w : nvfp4[std::size_t(i % copies)]) {
            CHECK_CUDA(read_weight_linear(w, sink, device.sm_count, st));
          }
        },
        10);
    t.cublas_us = median_us(
        reps, stream,
        [&](int i, cudaStream_t) {
          const float alpha = 1.0f, beta = 0.0f;
          const auto& set = bf16[std::size_t(i % bf16_copies)];
          for (std::size_t l = 0; l < set.size(); ++l) {
            const auto [k, n] = kLlamaLayers[l];
            CHECK_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k),
                                      &alpha, set[l], CUDA_R_16BF, int(k), xs[l], CUDA_R_16BF,
                                      int(k), &beta, outs[l], CUDA_R_16BF, int(n),
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          }
        },
        10);
    result.push_back(t);
  }
  return result;
}

}  // namespace nibble::bench
