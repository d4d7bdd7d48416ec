// The decode-sized layer kernels (kernels/layer/layer_ops.h: rms_norm, rms_norm_rows,
// silu_mul_halves, rope_and_store_kv) and the decode attention kernel
// (kernels/attention/decode_attention.h) launch with programmatic dependent launch,
// so they may start while the kernel before them runs. Here the kernel before releases them at
// its start and writes their input only ~60 us later: each must still read the new input (its
// wait comes before the read). The reference is the same kernel launched after a stream
// synchronisation (same inputs, no overlap): bitwise equal, and far from what the stale input
// (a constant poison) would give. Fresh random inputs per case; exits 77 without a GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/paged_attention.h"
#include "kernels/layer/layer_ops.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/gpu/gpu_check_support.h"
#include "tests/gpu/late_writer.h"
#include "tests/gpu/nvfp4_test_data.h"

namespace nibble::gpu_test {
namespace {

using bf16_bits = std::uint16_t;

std::vector<bf16_bits> random_bf16(std::mt19937_64& rng, std::size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<bf16_bits> v(n);
  for (auto& x : v) x = nvfp4::float_to_bf16(d(rng));
  return v;
}

// Runs `launch` twice on `stream`: once right behind a late_writer that puts `fresh` into `input`
// (poisoned first), once after the input is in place and the stream synchronised. Returns the
// outputs of both runs (read back from `output`).
template <class Launch>
std::pair<std::vector<bf16_bits>, std::vector<bf16_bits>> overlapped_and_settled(
    DeviceBuffer<bf16_bits>& input, const DeviceBuffer<bf16_bits>& fresh,
    DeviceBuffer<bf16_bits>& output, cudaStream_t stream, Launch launch) {
  constexpr long long kSpin = 100000;  // ~60 us at H100 clocks
  // A constant (0.75) poison: the stale input.
  NIBBLE_CUDA_CHECK(cudaMemset(input.ptr, 0x3F, input.count * sizeof(bf16_bits)));
  output.poison();
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  NIBBLE_CUDA_CHECK(
      launch_late_writer(input.ptr, fresh.ptr, std::int64_t(input.count), kSpin, stream));
  NIBBLE_CUDA_CHECK(launch());
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
  auto overlapped = output.download();
  output.poison();
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  NIBBLE_CUDA_CHECK(launch());
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {std::move(overlapped), output.download()};
}

void record(Results& results, const std::string& name,
            const std::pair<std::vector<bf16_bits>, std::vector<bf16_bits>>& runs) {
  const auto& [overlapped, settled] = runs;
  std::size_t differ = 0, unwritten = 0;
  for (std::size_t i = 0; i < settled.size(); ++i) {
    differ += overlapped[i] != settled[i];
    unwritten += settled[i] == 0xFFFF;
  }
  results.record(differ == 0 && unwritten < settled.size(), name,
                 std::to_string(differ) + " of " + std::to_string(settled.size()) +
                     " outputs differ from the settled run");
}

int run(int, char**) {
  const std::string reason = no_gpu_reason();
  if (!reason.empty()) {
    std::printf("SKIP: %s; the layer kernel checks need a CUDA GPU\n", reason.c_str());
    return kSkipExitCode;
  }
  std::mt19937_64 rng(0x1a7e5u);
  Results results;
  cudaStream_t stream = nullptr;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  for (const int rows : {1, 3, 16}) {
    const int dim = rows == 3 ? 2064 : 4096;  // 2064: 258 vectors, not a multiple of 32
    const std::size_t n = std::size_t(rows) * std::size_t(dim);
    DeviceBuffer<bf16_bits> x(n), fresh(n), out(n);
    fresh.upload(random_bf16(rng, n));
    DeviceBuffer<float> weight(static_cast<std::size_t>(dim));
    std::vector<float> w(static_cast<std::size_t>(dim));
    std::uniform_real_distribution<float> g(0.5f, 1.5f);
    for (float& v : w) v = g(rng);
    weight.upload(w);
    const std::string shape = " rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
    record(results, "rms_norm" + shape, overlapped_and_settled(x, fresh, out, stream, [&] {
             return kernels::rms_norm(x.ptr, weight.ptr, rows, dim, 1e-5f, out.ptr, stream);
           }));
    DeviceBuffer<std::int32_t> index(static_cast<std::size_t>(rows));
    std::vector<std::int32_t> picks(static_cast<std::size_t>(rows));
    for (int r = 0; r < rows; ++r) picks[std::size_t(r)] = rows - 1 - r;
    index.upload(picks);
    record(results, "rms_norm_rows" + shape, overlapped_and_settled(x, fresh, out, stream, [&] {
             return kernels::rms_norm_rows(x.ptr, index.ptr, weight.ptr, rows, dim, 1e-5f, out.ptr,
                                           stream);
           }));
    // SwiGLU over [rows, dim] gate_up: [rows, dim / 2] out (the rest of `out` stays poisoned).
    record(results, "silu_mul_halves" + shape, overlapped_and_settled(x, fresh, out, stream, [&] {
             return kernels::silu_mul_halves(x.ptr, rows, dim / 2, out.ptr, stream);
           }));
  }

  // RoPE + KV store from a fused qkv [T, (Hq + 2 Hkv) D]: q_out is the output checked (the caches
  // are written from the same values).
  for (const int tokens : {1, 5}) {
    const int q_heads = 32, kv_heads = 8, d = 128;
    const std::int64_t width = std::int64_t(q_heads + 2 * kv_heads) * d;
    DeviceBuffer<bf16_bits> qkv(static_cast<std::size_t>(tokens * width)), fresh(qkv.count);
    fresh.upload(random_bf16(rng, qkv.count));
    DeviceBuffer<bf16_bits> q_out(static_cast<std::size_t>(tokens * q_heads * d));
    DeviceBuffer<bf16_bits> k_cache(static_cast<std::size_t>(2 * tokens * kv_heads * d)),
        v_cache(k_cache.count);
    DeviceBuffer<std::int32_t> positions(static_cast<std::size_t>(tokens));
    DeviceBuffer<std::int64_t> slots(static_cast<std::size_t>(tokens));
    DeviceBuffer<double> inv_freq(static_cast<std::size_t>(d / 2));
    std::vector<std::int32_t> pos(static_cast<std::size_t>(tokens));
    std::vector<std::int64_t> slot(static_cast<std::size_t>(tokens));
    for (int t = 0; t < tokens; ++t) {
      pos[std::size_t(t)] = 1000 * t + 17;
      slot[std::size_t(t)] = 2 * tokens - 1 - t;
    }
    std::vector<double> freq(static_cast<std::size_t>(d / 2));
    for (int i = 0; i < d / 2; ++i) freq[std::size_t(i)] = std::pow(500000.0, -2.0 * i / d);
    positions.upload(pos);
    slots.upload(slot);
    inv_freq.upload(freq);
    const bf16_bits* k = qkv.ptr + std::int64_t(q_heads) * d;
    const kernels::RopeStoreArgs a{.q_in = qkv.ptr,
                                   .q_out = q_out.ptr,
                                   .k = k,
                                   .v = k + std::int64_t(kv_heads) * d,
                                   .q_stride = width,
                                   .kv_stride = width,
                                   .inv_freq = inv_freq.ptr,
                                   .positions = positions.ptr,
                                   .slots = slots.ptr,
                                   .k_cache = k_cache.ptr,
                                   .v_cache = v_cache.ptr,
                                   .tokens = tokens,
                                   .q_heads = q_heads,
                                   .kv_heads = kv_heads,
                                   .head_dim = d};
    record(results, "rope_and_store_kv tokens=" + std::to_string(tokens),
           overlapped_and_settled(qkv, fresh, q_out, stream,
                                  [&] { return kernels::rope_and_store_kv(a, stream); }));
  }
  // Decode attention (kernels/attention/decode_attention.h, a dependent launch that asks the L2
  // for its keys' cache rows before its wait): written late, first q, then the whole K cache
  // (every key, the older ones included: the rows it prefetched must not be read stale).
  for (const int rows : {1, 3}) {
    const int q_heads = 32, kv_heads = 4, d = 128, block = 16, context = 600;
    const int blocks_per_row = (context + block - 1) / block;
    const std::size_t cache_values = std::size_t(rows) * blocks_per_row * block * kv_heads * d;
    DeviceBuffer<bf16_bits> q(static_cast<std::size_t>(rows * q_heads * d)), fresh_q(q.count);
    DeviceBuffer<bf16_bits> k_cache(cache_values), v_cache(cache_values), fresh_k(cache_values);
    DeviceBuffer<bf16_bits> out(q.count);
    fresh_q.upload(random_bf16(rng, q.count));
    fresh_k.upload(random_bf16(rng, cache_values));
    v_cache.upload(random_bf16(rng, cache_values));
    // Row r's blocks in reverse order (a shuffled table), its newest key at context - 1 - r.
    std::vector<std::int32_t> table(static_cast<std::size_t>(rows * blocks_per_row));
    std::vector<kernels::AttentionTile> tiles(static_cast<std::size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      for (int b = 0; b < blocks_per_row; ++b)
        table[std::size_t(r * blocks_per_row + b)] = r * blocks_per_row + blocks_per_row - 1 - b;
      tiles[std::size_t(r)] = {r, 1, context - 1 - r, r * blocks_per_row};
    }
    DeviceBuffer<std::int32_t> d_table(table.size());
    d_table.upload(table);
    DeviceBuffer<kernels::AttentionTile> d_tiles(tiles.size());
    d_tiles.upload(tiles);
    kernels::PagedAttentionArgs a;
    a.q = q.ptr;
    a.k_cache = k_cache.ptr;
    a.v_cache = v_cache.ptr;
    a.block_tables = d_table.ptr;
    a.block_size = block;
    a.tiles = d_tiles.ptr;
    a.num_tiles = rows;
    a.shape = {q_heads, kv_heads, d};
    a.scale = 1.0f / std::sqrt(float(d));
    a.out = out.ptr;
    a.rows = rows;
    a.max_position = context - 1;
    a.sm_count = 132;
    a.splits = 8;  // one cluster of 8 blocks per (row, KV head): no merge kernel
    a.decode_attention = 1;
    const std::string shape =
        " rows=" + std::to_string(rows) + " context=" + std::to_string(context);
    NIBBLE_CUDA_CHECK(cudaMemcpy(k_cache.ptr, fresh_k.ptr, cache_values * sizeof(bf16_bits),
                                 cudaMemcpyDeviceToDevice));
    record(results, "decode_attention q late" + shape,
           overlapped_and_settled(q, fresh_q, out, stream,
                                  [&] { return kernels::paged_attention(a, stream); }));
    NIBBLE_CUDA_CHECK(
        cudaMemcpy(q.ptr, fresh_q.ptr, q.count * sizeof(bf16_bits), cudaMemcpyDeviceToDevice));
    record(results, "decode_attention K cache late" + shape,
           overlapped_and_settled(k_cache, fresh_k, out, stream,
                                  [&] { return kernels::paged_attention(a, stream); }));
  }
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
  return results.exit_code();
}

}  // namespace
}  // namespace nibble::gpu_test

int main(int argc, char** argv) {
  return nibble::gpu_test::run_reporting_failures(nibble::gpu_test::run, argc, argv);
}
