// The decode attention checks (decode_attention_check.h).
#include "tests/gpu/decode_attention_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "kernels/attention/attention_ref.h"
#include "kernels/attention/decode_attention.h"
#include "kernels/attention/kv_fp8_ref.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/gpu/relative_error.h"
#include "tests/gpu/window_tables.h"

namespace nibble::gpu_test {
namespace {

using kernels::AttentionShape;
using kernels::AttentionTile;
using kernels::RefSequence;

// One device allocation, freed with its owner.
template <typename T>
class Device {
 public:
  explicit Device(std::size_t n) : size_(n) {
    NIBBLE_CUDA_CHECK(cudaMalloc(&data_, std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  explicit Device(const std::vector<T>& host) : Device(host.size()) {
    NIBBLE_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Device() { cudaFree(data_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  T* get() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_ = 0;
  T* data_ = nullptr;
};

struct Case {
  const char* name;
  AttentionShape shape;
  std::vector<int> contexts;  // keys of each sequence (its decode row is at position keys - 1)
  bool fp8 = false;
  int block = 16;
  bool sinks = false;  // random sink logits per query head
  int window = 0;      // sliding window (0: none)
};

// How a run picks its splits: the engine's rule on an H100-sized GPU, none, or a forced count as a
// captured decode graph replays it (with or without the workspace a count above 8 needs), with the
// block-table lookup by shift (default options) or by division (flash options 0).
struct SplitRun {
  const char* name;
  int sm_count;
  int splits;  // 0: from the rule
  bool workspace;
  int flash_options;
};
constexpr SplitRun kRuns[] = {
    {"rule", 132, 0, true, -1},
    {"no split", 0, 0, true, -1},
    {"2", 132, 2, true, -1},
    {"8", 132, 8, true, -1},
    {"16", 132, 16, true, -1},
    {"64", 132, 64, true, -1},
    {"32 no workspace", 132, 32, false, -1},
    {"rule, division", 132, 0, true, 0},
};

// Quantises the cache rows in place to what an FP8 cache decodes to; returns codes and scales.
void quantize(std::vector<float>& values, int D, std::vector<std::uint8_t>& codes,
              std::vector<std::uint16_t>& scales) {
  codes.resize(values.size());
  scales.resize(values.size() / std::size_t(D));
  for (std::size_t r = 0; r < scales.size(); ++r) {
    const std::span<float> row(values.data() + r * std::size_t(D), std::size_t(D));
    scales[r] = kernels::quantize_kv_row(row, {codes.data() + r * std::size_t(D), std::size_t(D)});
    for (std::size_t d = 0; d < row.size(); ++d)
      row[d] = kernels::dequantize_kv(codes[r * std::size_t(D) + d], scales[r]);
  }
}

void run_case(const Case& c, std::mt19937_64& rng, Results& results) {
  const int Hq = c.shape.q_heads, Hkv = c.shape.kv_heads, D = c.shape.head_dim, bs = c.block;
  std::normal_distribution<float> normal;
  std::vector<RefSequence> seqs;
  int blocks = 3;  // blocks no sequence owns
  for (const int keys : c.contexts) {
    seqs.push_back({keys - 1, 1, {}});
    blocks += (keys + bs - 1) / bs;
  }
  std::vector<int> pool(static_cast<std::size_t>(blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<AttentionTile> tiles;
  std::vector<std::int32_t> tables;
  int used = 0, max_position = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    RefSequence& s = seqs[i];
    const int need = (s.start + 1 + bs - 1) / bs;
    s.table.assign(pool.begin() + used, pool.begin() + used + need);
    used += need;
    free_blocks_before_window(s, bs, c.window);
    tiles.push_back({std::int32_t(i), 1, s.start, std::int32_t(tables.size())});
    tables.insert(tables.end(), s.table.begin(), s.table.end());
    max_position = std::max(max_position, s.start);
  }
  const std::size_t cache_values = std::size_t(blocks) * std::size_t(bs * Hkv * D);
  const int T = int(seqs.size());
  std::vector<std::uint16_t> q(std::size_t(T) * std::size_t(Hq * D)), k(cache_values),
      v(cache_values);
  std::vector<float> qf(q.size()), kf(k.size()), vf(v.size());
  auto fill = [&](std::vector<std::uint16_t>& bits, std::vector<float>& values) {
    for (std::size_t i = 0; i < bits.size(); ++i) {
      bits[i] = nvfp4::float_to_bf16(normal(rng));
      values[i] = nvfp4::bf16_to_float(bits[i]);
    }
  };
  fill(q, qf);
  fill(k, kf);
  fill(v, vf);
  std::vector<std::uint8_t> k8, v8;
  std::vector<std::uint16_t> ks, vs;
  if (c.fp8) {  // the reference sees what the cache holds
    quantize(kf, D, k8, ks);
    quantize(vf, D, v8, vs);
  }
  std::vector<float> sinks;
  if (c.sinks)
    for (int h = 0; h < Hq; ++h) sinks.push_back(1.0f + 2.0f * normal(rng));
  const double scale = 1.0 / std::sqrt(double(D));
  const std::vector<double> want =
      kernels::paged_attention_ref(qf, kf, vf, {Hq, Hkv, D, bs}, seqs, scale, {sinks, c.window});

  Device<std::uint16_t> dq(q), dk(c.fp8 ? std::vector<std::uint16_t>{} : k),
      dv(c.fp8 ? std::vector<std::uint16_t>{} : v), dks(ks), dvs(vs), dout(q.size());
  Device<std::uint8_t> dk8(k8), dv8(v8);
  Device<AttentionTile> dtiles(tiles);
  Device<std::int32_t> dtables(tables);
  const std::size_t work_floats = kernels::paged_attention_workspace_floats(c.shape, T, 128);
  Device<float> dwork(work_floats);
  Device<float> dsinks(sinks);

  kernels::PagedAttentionArgs a;
  a.q = dq.get();
  if (c.fp8) {
    a.k_cache8 = dk8.get();
    a.v_cache8 = dv8.get();
    a.k_scale = dks.get();
    a.v_scale = dvs.get();
  } else {
    a.k_cache = dk.get();
    a.v_cache = dv.get();
  }
  a.block_tables = dtables.get();
  a.block_size = bs;
  a.tiles = dtiles.get();
  a.num_tiles = T;
  a.rows = T;
  a.shape = c.shape;
  a.scale = float(scale);
  a.out = dout.get();
  a.max_position = max_position;
  a.decode_tiles = T;
  a.decode_attention = 1;
  a.sinks = c.sinks ? dsinks.get() : nullptr;
  a.window = c.window;

  double worst = 0;
  std::string worst_run = "-";
  std::size_t bad_total = 0;
  int rule_splits = 0;
  for (const SplitRun& run : kRuns) {
    a.sm_count = run.sm_count;
    a.splits = run.splits;
    a.workspace = run.workspace ? dwork.get() : nullptr;
    a.workspace_floats = run.workspace ? work_floats : 0;
    a.flash_options = run.flash_options;
    if (run.splits == 0 && run.sm_count > 0)  // paged_attention's rule: the window's keys
      rule_splits = kernels::paged_decode_splits(
          c.shape, T, c.window > 0 ? std::min(max_position, c.window - 1) : max_position,
          run.sm_count, -1, 1);
    NIBBLE_CUDA_CHECK(cudaMemset(dout.get(), 0xff, q.size() * 2));  // poison: NaN
    NIBBLE_CUDA_CHECK(kernels::paged_attention(a, nullptr));
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> got(q.size());
    NIBBLE_CUDA_CHECK(cudaMemcpy(got.data(), dout.get(), q.size() * 2, cudaMemcpyDeviceToHost));
    const RelativeError err = relative_error(got, want);
    bad_total += err.not_finite;
    if (!(err.l2 <= worst)) {
      worst = err.l2;
      worst_run = run.name;
    }
  }
  const bool kernel = kernels::detail::decode_attention_supported(c.shape);
  char detail[300];
  std::snprintf(detail, sizeof detail,
                "Hq %d Hkv %d D %d%s%s window %d block %d, %d sequences, keys %d..%d, %s, rule "
                "splits %d: worst relative L2 %.3g (%s), %zu not finite",
                Hq, Hkv, D, c.fp8 ? " fp8" : "", c.sinks ? " sinks" : "", c.window, bs, T,
                *std::min_element(c.contexts.begin(), c.contexts.end()), max_position + 1,
                kernel ? "decode attention kernel" : "fallback", rule_splits, worst,
                worst_run.c_str(), bad_total);
  results.record(worst < 5e-3, c.name, detail);
}

std::vector<Case> cases(std::mt19937_64& rng) {
  const std::vector<int> edges{1, 2, 15, 16, 17, 31, 32, 33, 66, 127, 129, 511, 513, 1000};
  std::vector<Case> out;
  for (const AttentionShape s :
       {AttentionShape{32, 8, 128}, AttentionShape{32, 4, 128}, AttentionShape{8, 8, 64},
        AttentionShape{16, 8, 64}, AttentionShape{24, 8, 128}, AttentionShape{40, 8, 128},
        AttentionShape{16, 2, 256}, AttentionShape{8, 4, 256}, AttentionShape{56, 8, 64},
        AttentionShape{6, 1, 128}, AttentionShape{64, 4, 128}})
    for (const bool fp8 : {false, true}) {
      if (fp8 && s.q_heads / s.kv_heads > 8) continue;  // no FP8 fallback for 16 heads a KV head
      out.push_back({"decode attention edges", s, edges, fp8});
      out.push_back({"decode attention 66 keys", s, {66}, fp8});
    }
  out.push_back({"decode attention 4097 keys", AttentionShape{32, 8, 128}, {4097}});
  // Long contexts.
  for (const bool fp8 : {false, true}) {
    out.push_back({"decode attention long", AttentionShape{32, 8, 128}, {40000}, fp8});
    out.push_back({"decode attention long", AttentionShape{32, 4, 128}, {32768, 100}, fp8});
    out.push_back({"decode attention long", AttentionShape{16, 2, 256}, {20001}, fp8});
    out.push_back({"decode attention long", AttentionShape{8, 8, 64}, {12345}, fp8});
  }
  // Batches of mixed lengths, and block sizes that are not powers of two (division lookups).
  std::uniform_int_distribution<int> up_to_2500(1, 2500), up_to_5000(1, 5000);
  std::vector<int> batch64(64), batch8(8);
  for (int& n : batch64) n = up_to_2500(rng);
  for (int& n : batch8) n = up_to_5000(rng);
  for (const bool fp8 : {false, true}) {
    out.push_back({"decode attention batch 64", AttentionShape{32, 8, 128}, batch64, fp8});
    out.push_back({"decode attention batch 8", AttentionShape{32, 4, 128}, batch8, fp8});
    out.push_back({"decode attention block 12", AttentionShape{32, 8, 128}, batch8, fp8, 12});
    out.push_back({"decode attention block 32", AttentionShape{16, 8, 64}, edges, fp8, 32});
  }
  // gpt-oss's features on its shape (GQA 8, head_dim 64) and at head_dim 128: windows that start
  // on a cache block's boundary (keys 144, 8192 with 128: first keys 16, 8064) and inside one (130,
  // 145, 1000; every context with 37), of one key, and past every context; sinks alone and with
  // them; 16-key blocks and 12 (division lookups); BF16 and FP8 caches.
  const std::vector<int> window_edges{1, 2, 37, 127, 128, 129, 130, 144, 145, 1000, 8192};
  struct Features {
    const char* name;
    bool sinks;
    int window;
  };
  for (const Features f :
       {Features{"decode sinks", true, 0}, Features{"decode window", false, 128},
        Features{"decode sinks + window", true, 128}, Features{"decode window 37", true, 37},
        Features{"decode window 1", true, 1}, Features{"decode window past context", true, 100000}})
    for (const AttentionShape s : {AttentionShape{64, 8, 64}, AttentionShape{32, 8, 128}})
      for (const bool fp8 : {false, true})
        for (const int block : {16, 12}) {
          Case c{f.name, s, window_edges, fp8, block};
          c.sinks = f.sinks;
          c.window = f.window;
          out.push_back(c);
        }
  return out;
}

}  // namespace

void run_decode_attention_checks(std::mt19937_64& rng, Results& results) {
  for (const Case& c : cases(rng)) run_case(c, rng, results);
}

}  // namespace nibble::gpu_test
