// The flash prefill benchmark (flash_bench.h).
#include "tests/gpu/flash_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention/paged_attention.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/gpu/gpu_check_support.h"
#include "tools/kernel-bench/mma_ceiling.h"

namespace nibble::gpu_test {
namespace {

constexpr kernels::AttentionShape kShape{32, 8, 128};
constexpr int kBlock = 16;
constexpr std::size_t kReps = 5;  // timed calls per form (median), after one warm-up

// One device allocation, freed with its owner.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    NIBBLE_CUDA_CHECK(cudaMalloc(&data_, std::max<std::size_t>(size_, 1) * sizeof(T)));
    NIBBLE_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return data_; }
  std::vector<T> to_host() const {
    std::vector<T> out(size_);
    NIBBLE_CUDA_CHECK(cudaMemcpy(out.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  std::size_t size_ = 0;
  T* data_ = nullptr;
};

// Uniform BF16 values of unit variance (scores of unit spread after the 1/sqrt(D) scale); cheap
// enough for the 134M query values of a 32k prompt.
std::vector<std::uint16_t> random_bf16(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::uint16_t> out(n);
  for (auto& x : out)
    x = nvfp4::float_to_bf16((float(rng() >> 40) / float(1 << 24) * 2.0f - 1.0f) * 1.7320508f);
  return out;
}

// E4M3 codes of every finite value (0x7f / 0xff are NaN).
std::vector<std::uint8_t> random_fp8(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::uint8_t> out(n);
  for (auto& x : out) {
    x = std::uint8_t(rng() >> 56);
    if ((x & 0x7f) == 0x7f) x ^= 1;
  }
  return out;
}

double relative_l2(const std::vector<std::uint16_t>& got, const std::vector<std::uint16_t>& want) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = nvfp4::bf16_to_float(got[i]), w = nvfp4::bf16_to_float(want[i]);
    if (!std::isfinite(g)) return INFINITY;
    diff += (g - w) * (g - w);
    ref += w * w;
  }
  return std::sqrt(diff / ref);
}

// Median milliseconds of kReps calls, each between its own pair of events, all recorded before
// one synchronisation (no host gap between calls), after one warm-up call.
double median_ms(const kernels::PagedAttentionArgs& a) {
  NIBBLE_CUDA_CHECK(kernels::paged_attention(a, nullptr));
  std::vector<cudaEvent_t> marks(2 * kReps, nullptr);
  for (auto& mark : marks) NIBBLE_CUDA_CHECK(cudaEventCreate(&mark));
  for (std::size_t i = 0; i < marks.size(); i += 2) {
    NIBBLE_CUDA_CHECK(cudaEventRecord(marks[i]));
    NIBBLE_CUDA_CHECK(kernels::paged_attention(a, nullptr));
    NIBBLE_CUDA_CHECK(cudaEventRecord(marks[i + 1]));
  }
  NIBBLE_CUDA_CHECK(cudaEventSynchronize(marks.back()));
  std::vector<double> ms;
  for (std::size_t i = 0; i < marks.size(); i += 2) {
    float t = 0.0f;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&t, marks[i], marks[i + 1]));
    ms.push_back(t);
  }
  for (const cudaEvent_t mark : marks) cudaEventDestroy(mark);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The last `rows` positions of an n-token prompt (rows == n: the whole prompt in one step; fewer:
// the engine's chunked prefill, whose chunk attends to every earlier key).
void bench_prompt(int n, int rows, double ceiling, std::mt19937_64& rng) {
  const int Hq = kShape.q_heads, Hkv = kShape.kv_heads, D = kShape.head_dim;
  const int blocks = (n + kBlock - 1) / kBlock;
  std::vector<std::int32_t> table(static_cast<std::size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const std::size_t cache_values = std::size_t(blocks) * kBlock * std::size_t(Hkv * D);
  const int rows_per_tile = kernels::attention_rows_per_tile(kShape);
  std::vector<kernels::AttentionTile> tiles;
  const int first = n - rows;
  for (int i = 0; i < rows; i += rows_per_tile)
    tiles.push_back({i, std::min(rows_per_tile, rows - i), first + i, 0});

  const DeviceArray<std::uint16_t> q(random_bf16(std::size_t(rows) * std::size_t(Hq * D), rng));
  const DeviceArray<std::uint16_t> k(random_bf16(cache_values, rng)),
      v(random_bf16(cache_values, rng));
  const DeviceArray<std::uint8_t> k8(random_fp8(cache_values, rng)),
      v8(random_fp8(cache_values, rng));
  const std::vector<std::uint16_t> scales(cache_values / std::size_t(D),
                                          nvfp4::float_to_bf16(1.0f / 64));
  const DeviceArray<std::uint16_t> k_scale(scales), v_scale(scales);
  const DeviceArray<std::int32_t> tables(table);
  const DeviceArray<kernels::AttentionTile> device_tiles(tiles);
  const DeviceArray<std::uint16_t> out(
      std::vector<std::uint16_t>(std::size_t(rows) * std::size_t(Hq * D)));

  kernels::PagedAttentionArgs a;
  a.q = q.get();
  a.block_tables = tables.get();
  a.block_size = kBlock;
  a.tiles = device_tiles.get();
  a.num_tiles = int(tiles.size());
  a.shape = kShape;
  a.scale = 1.0f / std::sqrt(float(D));
  a.out = out.get();
  a.rows = rows;
  a.max_position = n - 1;
  a.decode_tiles = 0;
  // 4 D Hq per (query, key) pair the causal mask keeps: position p sees p + 1 keys.
  const double flop = 4.0 * D * Hq * ((double(n) * (n + 1) - double(first) * (first + 1)) / 2);
  for (const bool fp8 : {false, true}) {
    a.k_cache = fp8 ? nullptr : k.get();
    a.v_cache = fp8 ? nullptr : v.get();
    a.k_cache8 = fp8 ? k8.get() : nullptr;
    a.v_cache8 = fp8 ? v8.get() : nullptr;
    a.k_scale = fp8 ? k_scale.get() : nullptr;
    a.v_scale = fp8 ? v_scale.get() : nullptr;
    std::vector<std::uint16_t> base;
    double best_tflops = 0.0, v3_tflops = 0.0;
    int best_form = 0;
    // v2, v3's steps, v3's defaults (11: sm_12x, 15: sm_9x), then v4 (PERF_NOTES.md): the lazy
    // rescale on each default, with one barrier per chunk, with the mask-free body, and all.
    constexpr int v3_hopper = kernels::kFlashDefaultOptions | kernels::kFlashWideScores,
                  lazy = kernels::kFlashLazyRescale;
    for (const int form :
         {0, kernels::kFlashFastSoftmax, kernels::kFlashChunk64,
          kernels::kFlashChunk64 | kernels::kFlashFastSoftmax, kernels::kFlashDefaultOptions,
          v3_hopper, kernels::kFlashDefaultOptions | lazy, v3_hopper | lazy,
          v3_hopper | lazy | kernels::kFlashOneBarrier, v3_hopper | lazy | kernels::kFlashMaskFree,
          kernels::kFlashAllOptions & ~kernels::kFlashWideScores, kernels::kFlashAllOptions}) {
      a.flash_options = form;
      const double ms = median_ms(a);
      const std::vector<std::uint16_t> got = out.to_host();
      if (form == 0) base = got;
      const double tflops = flop / (ms * 1e-3) / 1e12;
      // One short line per form (the device tool returns only the output's tail).
      std::printf(
          "flash n %d rows %d %s options %3d: %8.3f ms %6.1f TFLOP/s %5.1f%%, L2 to 0 %.1e\n", n,
          rows, fp8 ? "fp8 " : "bf16", form, ms, tflops, 100.0 * tflops / ceiling,
          relative_l2(got, base));
      if (tflops > best_tflops) {
        best_tflops = tflops;
        best_form = form;
      }
      if (form == v3_hopper) v3_tflops = tflops;
      std::fflush(stdout);
    }
    std::printf("best n %d rows %d %s: options %d %.1f TFLOP/s, %.3fx options %d\n", n, rows,
                fp8 ? "fp8 " : "bf16", best_form, best_tflops, best_tflops / v3_tflops, v3_hopper);
  }
}

}  // namespace

int run_flash_bench(int argc, char** argv) {
  std::vector<int> lengths;
  for (int i = 2; i < argc; ++i) lengths.push_back(std::atoi(argv[i]));
  if (lengths.empty()) lengths = {2048, 8192, 32768};
  for (const int n : lengths)
    if (n < 1) {
      std::printf("FAIL: prompt lengths must be positive integers\n");
      return 2;
    }
  int device = 0, sm_count = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  cudaDeviceProp prop{};
  NIBBLE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  unsigned* sink = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned)));
  // The flash kernel runs 8 warps per SM (two blocks of 4): the ceiling at that count is its
  // bound; 16 warps shows what more occupancy would give.
  double ceiling8 = 0.0, ceiling16 = 0.0;
  NIBBLE_CUDA_CHECK(bench::mma_sync_ceiling(sm_count, 8, 5, sink, nullptr, &ceiling8));
  NIBBLE_CUDA_CHECK(bench::mma_sync_ceiling(sm_count, 16, 5, sink, nullptr, &ceiling16));
  cudaFree(sink);
  std::printf(
      "%s, %d SMs: mma.sync BF16 ceiling %.1f TFLOP/s at 8 warps/SM, %.1f at 16; flash: causal, "
      "Hq %d Hkv %d D %d, %d-token cache blocks\n",
      prop.name, sm_count, ceiling8, ceiling16, kShape.q_heads, kShape.kv_heads, kShape.head_dim,
      kBlock);
  std::mt19937_64 rng(20261126);
  for (const int n : lengths) bench_prompt(n, n, ceiling8, rng);
  // The engine's default chunked prefill (--max-num-batched-tokens 2048): the last chunk of the
  // longest prompt, 512 blocks of nearly equal length on 2 x SMs block slots.
  const int longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest > 2048) bench_prompt(longest, 2048, ceiling8, rng);
  return 0;
}

}  // namespace nibble::gpu_test
