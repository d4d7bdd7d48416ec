// The decode attention benchmark (decode_bench.h).
#include "tests/gpu/decode_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention/paged_attention.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/gpu/gpu_check_support.h"
#include "tests/gpu/relative_error.h"

namespace nibble::gpu_test {
namespace {

constexpr int kBlock = 16;
constexpr int kReplays = 20;                      // timed graph replays, after one warm-up
constexpr std::size_t kRotateBytes = 256u << 20;  // K/V bytes the calls rotate over (> L2)
constexpr int kMaxLayers = 64, kCallsPerGraph = 32;

// One device allocation, freed with its owner.
template <typename T>
class Buffer {
 public:
  explicit Buffer(std::size_t n) {
    NIBBLE_CUDA_CHECK(cudaMalloc(&data_, std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  ~Buffer() { cudaFree(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
};

// Fills n bytes with repeats of a random pattern (no NaN E4M3 codes: 0x7f / 0xff; as BF16 pairs,
// values of moderate size), not zeros (METHOD.md: zeros can run faster).
void fill_random(void* dst, std::size_t n, const std::vector<std::uint8_t>& pattern) {
  auto* out = static_cast<std::uint8_t*>(dst);
  for (std::size_t at = 0; at < n; at += pattern.size())
    NIBBLE_CUDA_CHECK(cudaMemcpy(out + at, pattern.data(), std::min(pattern.size(), n - at),
                                 cudaMemcpyHostToDevice));
}

// Device-to-device copy rate (bytes read + written per second) of a 1 GiB buffer.
double copy_rate() {
  const std::size_t n = std::size_t(1) << 30;
  Buffer<std::uint8_t> a(n), b(n);
  NIBBLE_CUDA_CHECK(cudaMemset(a.get(), 1, n));
  cudaEvent_t start, stop;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&start));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&stop));
  NIBBLE_CUDA_CHECK(cudaMemcpy(b.get(), a.get(), n, cudaMemcpyDeviceToDevice));
  NIBBLE_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < 10; ++i)
    NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice));
  NIBBLE_CUDA_CHECK(cudaEventRecord(stop));
  NIBBLE_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 2.0 * 10 * double(n) / (double(ms) * 1e-3);
}

struct Method {
  const char* name;
  int decode_attention, flash_decode;
};
constexpr Method kMethods[] = {{"flash", 0, 1}, {"cuda-core", 0, 0}, {"new", 1, -1}};

struct Model {
  const char* name;
  kernels::AttentionShape shape;
  int window = 0;      // sliding window (PagedAttentionArgs::window)
  bool sinks = false;  // attention sinks
};

// Microseconds a call, and the output of the first layer's call.
double time_calls(std::vector<kernels::PagedAttentionArgs> layers, std::vector<std::uint16_t>& out,
                  std::size_t out_values) {
  cudaStream_t stream;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  NIBBLE_CUDA_CHECK(kernels::paged_attention(layers[0], stream));  // eager: errors surface here
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
  out.resize(out_values);
  NIBBLE_CUDA_CHECK(cudaMemcpy(out.data(), layers[0].out, out_values * 2, cudaMemcpyDeviceToHost));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  NIBBLE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kCallsPerGraph; ++i)
    NIBBLE_CUDA_CHECK(kernels::paged_attention(layers[std::size_t(i) % layers.size()], stream));
  NIBBLE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  NIBBLE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&start));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&stop));
  NIBBLE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  NIBBLE_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int r = 0; r < kReplays; ++r) NIBBLE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  NIBBLE_CUDA_CHECK(cudaEventRecord(stop, stream));
  NIBBLE_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return double(ms) * 1e3 / (kReplays * kCallsPerGraph);
}

// One configuration: `rows` sequences of `keys` keys each. Returns false when the new kernel's
// output strays from the flash kernel's.
bool bench(const Model& model, int keys, int rows, bool fp8, int sm_count, double copy,
           const std::vector<std::uint8_t>& pattern, std::mt19937_64& rng) {
  const kernels::AttentionShape s = model.shape;
  const int D = s.head_dim, Hkv = s.kv_heads, Hq = s.q_heads;
  const int seq_blocks = (keys + kBlock - 1) / kBlock, blocks = rows * seq_blocks;
  const std::size_t row_values = std::size_t(Hkv) * std::size_t(D);
  const std::size_t layer_values = std::size_t(blocks) * kBlock * row_values;
  const std::size_t elem = fp8 ? 1 : 2;
  // K/V bytes a call reads (FP8: the 2-byte scales of each row too): a window's keys only.
  const int seen = model.window > 0 ? std::min(keys, model.window) : keys;
  const double call_bytes =
      double(rows) * seen * Hkv * (2.0 * D * double(elem) + (fp8 ? 4.0 : 0.0));
  const int layers = int(std::clamp<std::size_t>(
      kRotateBytes / std::max<std::size_t>(std::size_t(call_bytes), 1) + 1, 1, kMaxLayers));

  Buffer<std::uint8_t> k(layer_values * elem * std::size_t(layers)),
      v(layer_values * elem * std::size_t(layers));
  fill_random(k.get(), layer_values * elem * std::size_t(layers), pattern);
  fill_random(v.get(), layer_values * elem * std::size_t(layers), pattern);
  const std::size_t scale_values = layer_values / std::size_t(D) * std::size_t(layers);
  Buffer<std::uint16_t> k_scale(fp8 ? scale_values : 1), v_scale(fp8 ? scale_values : 1);
  if (fp8) {
    const std::vector<std::uint16_t> scales(scale_values, nvfp4::float_to_bf16(1.0f / 64));
    NIBBLE_CUDA_CHECK(
        cudaMemcpy(k_scale.get(), scales.data(), scale_values * 2, cudaMemcpyHostToDevice));
    NIBBLE_CUDA_CHECK(
        cudaMemcpy(v_scale.get(), scales.data(), scale_values * 2, cudaMemcpyHostToDevice));
  }
  std::vector<std::int32_t> table(static_cast<std::size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<kernels::AttentionTile> tiles;
  for (int r = 0; r < rows; ++r) tiles.push_back({r, 1, keys - 1, r * seq_blocks});
  std::vector<std::uint16_t> q(std::size_t(rows) * std::size_t(Hq * D));
  std::normal_distribution<float> normal;
  for (auto& x : q) x = nvfp4::float_to_bf16(normal(rng));
  Buffer<std::int32_t> d_table(table.size());
  Buffer<kernels::AttentionTile> d_tiles(tiles.size());
  Buffer<std::uint16_t> d_q(q.size()), d_out(q.size());
  NIBBLE_CUDA_CHECK(
      cudaMemcpy(d_table.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  NIBBLE_CUDA_CHECK(cudaMemcpy(d_tiles.get(), tiles.data(), tiles.size() * sizeof(tiles[0]),
                               cudaMemcpyHostToDevice));
  NIBBLE_CUDA_CHECK(cudaMemcpy(d_q.get(), q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  const std::size_t work_floats = kernels::paged_attention_workspace_floats(s, rows, 128);
  Buffer<float> work(work_floats);
  std::vector<float> sinks(static_cast<std::size_t>(Hq));
  for (float& x : sinks) x = 1.0f + normal(rng);
  Buffer<float> d_sinks(sinks.size());
  NIBBLE_CUDA_CHECK(
      cudaMemcpy(d_sinks.get(), sinks.data(), sinks.size() * 4, cudaMemcpyHostToDevice));

  // us a call of one method at a split count, its output in `out`.
  auto run = [&](const Method& method, int splits, std::vector<std::uint16_t>& out) {
    std::vector<kernels::PagedAttentionArgs> calls;
    for (int l = 0; l < layers; ++l) {
      kernels::PagedAttentionArgs a;
      a.q = d_q.get();
      const std::size_t at = std::size_t(l) * layer_values;
      if (fp8) {
        a.k_cache8 = k.get() + at;
        a.v_cache8 = v.get() + at;
        a.k_scale = k_scale.get() + at / std::size_t(D);
        a.v_scale = v_scale.get() + at / std::size_t(D);
      } else {
        a.k_cache = reinterpret_cast<const std::uint16_t*>(k.get()) + at;
        a.v_cache = reinterpret_cast<const std::uint16_t*>(v.get()) + at;
      }
      a.block_tables = d_table.get();
      a.block_size = kBlock;
      a.tiles = d_tiles.get();
      a.num_tiles = rows;
      a.rows = rows;
      a.shape = s;
      a.scale = 1.0f / std::sqrt(float(D));
      a.out = d_out.get();
      a.max_position = keys - 1;
      a.sm_count = sm_count;
      a.splits = splits;
      a.workspace = work.get();
      a.workspace_floats = work_floats;
      a.decode_tiles = rows;
      a.flash_decode = method.flash_decode;
      a.decode_attention = method.decode_attention;
      a.window = model.window;
      a.sinks = model.sinks ? d_sinks.get() : nullptr;
      calls.push_back(a);
    }
    return time_calls(calls, out, q.size());
  };
  double us[3] = {0, 0, 0};
  int splits[3] = {0, 0, 0};
  std::vector<std::uint16_t> outs[3], other;
  for (int m = 0; m < 3; ++m) {
    splits[m] = kernels::paged_decode_splits(s, rows, seen - 1, sm_count, kMethods[m].flash_decode,
                                             kMethods[m].decode_attention);
    us[m] = run(kMethods[m], splits[m], outs[m]);
  }
  // The new kernel at half and twice its rule's split count: how flat the rule's choice is.
  const double half = splits[2] > 1 ? run(kMethods[2], splits[2] / 2, other) : 0.0;
  const double twice = splits[2] < 128 ? run(kMethods[2], splits[2] * 2, other) : 0.0;
  std::vector<double> flash_out(outs[0].size());
  for (std::size_t i = 0; i < flash_out.size(); ++i)
    flash_out[i] = nvfp4::bf16_to_float(outs[0][i]);
  const double err = relative_error(outs[2], flash_out).l2;
  auto pct = [&](double t) { return 100.0 * call_bytes / (t * 1e-6) / copy; };
  std::printf(
      "%-9s b%-2d %5d keys %-4s | flash %7.2f us %5.1f%% (%3d splits) | cuda-core %7.2f us "
      "%5.1f%% (%3d) | new %7.2f us %5.1f%% (%3d; half %.2f, twice %.2f) | new/flash "
      "%.2fx | L2 vs flash %.1e%s\n",
      model.name, rows, keys, fp8 ? "fp8" : "bf16", us[0], pct(us[0]), splits[0], us[1], pct(us[1]),
      splits[1], us[2], pct(us[2]), splits[2], half, twice, us[0] / us[2], err,
      err < 1e-2 ? "" : " FAIL");
  std::fflush(stdout);
  return err < 1e-2;
}

}  // namespace

int run_decode_bench(int, char**) {
  int device = 0, sm_count = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  const double copy = copy_rate();
  std::printf(
      "decode attention: %d SMs, copy %.0f GB/s (read + write); us a layer's call in a "
      "graph of %d back-to-back calls; %% of copy for the K/V bytes\n",
      sm_count, copy / 1e9, kCallsPerGraph);
  std::mt19937_64 rng(20261126);
  std::vector<std::uint8_t> pattern(std::size_t(16) << 20);
  for (std::size_t i = 0; i < pattern.size(); i += 2) {
    // A BF16 value in [-2, 2) (high byte second) whose bytes are also non-NaN E4M3 codes.
    const float x = float(rng() >> 40) / float(1 << 24) * 4.0f - 2.0f;
    const std::uint16_t bits = nvfp4::float_to_bf16(x);
    pattern[i] = std::uint8_t(bits & 0xff) == 0x7f || (bits & 0xff) == 0xff
                     ? std::uint8_t(bits & 0xfe)
                     : std::uint8_t(bits & 0xff);
    pattern[i + 1] = std::uint8_t(bits >> 8);
  }
  // gpt-oss (64 query / 8 KV heads, head_dim 64, sinks): its full and its sliding (128) layers.
  const Model models[] = {{"Llama-8B", {32, 8, 128}},
                          {"Qwen3-MoE", {32, 4, 128}},
                          {"oss-full", {64, 8, 64}, 0, true},
                          {"oss-slide", {64, 8, 64}, 128, true}};
  bool ok = true;
  for (const Model& model : models)
    for (const int rows : {1, 8})
      for (const int keys : {66, 512, 4096, 32768})
        for (const bool fp8 : {false, true})
          ok = bench(model, keys, rows, fp8, sm_count, copy, pattern, rng) && ok;
  return ok ? 0 : 1;
}

}  // namespace nibble::gpu_test
