// The paged attention kernels (kernels/attention/: decode, flash prefill on tensor cores, the FP32
// tile fallback) against the FP64 reference (kernels/attention/attention_ref.h) on fresh random
// queries, caches and shuffled block tables: head_dim 8/64/96/128/256, 1 to 16 query heads per KV
// head, prefill chunks that start mid-sequence, lengths that are not multiples of any tile,
// decodes alone and mixed with prefill rows, keys in one block or split over blocks and merged,
// long contexts; the same with an FP8 cache (kernels/attention/kv_fp8_ref.h: the reference reads
// the decoded values), and the FP8 store of rope_and_store_kv against the host quantiser, code
// for code. Every step with prefill rows runs in each form of the flash kernel (kFlash* options).
// gpt-oss's attention features (PagedAttentionArgs::sinks, window) on its shape (64 query heads, 8
// KV heads, head_dim 64) and others, through every kernel: sinks alone, windows alone (1 key, 37,
// 128, past the context), both, BF16 and FP8 caches.
// The decode attention kernel's checks: tests/gpu/decode_attention_check.h (`--decode`: those
// alone).
// `--bench` times the flash kernel instead (tests/gpu/flash_bench.h), `--decode-bench` a step of
// decodes' attention (tests/gpu/decode_bench.h). Bound: relative L2 < 5e-3, 1e-2 for 'peaked' rows
// (a softmax near one-hot puts the BF16 rounding of P values near 1 on one value row)
// (BF16 operands and output; METHOD.md's 1e-3..1e-2). Every output element is poisoned (NaN) before
// each run. Exits 77 without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_ref.h"
#include "kernels/attention/flash_prefill_dev.h"
#include "kernels/attention/kv_fp8_ref.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/layer/layer_ops.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/gpu/decode_attention_check.h"
#include "tests/gpu/decode_bench.h"
#include "tests/gpu/flash_bench.h"
#include "tests/gpu/gpu_check_support.h"
#include "tests/gpu/relative_error.h"
#include "tests/gpu/window_tables.h"

namespace nibble {
namespace {

using gpu_test::Results;
using kernels::AttentionShape;
using kernels::AttentionTile;
using kernels::RefSequence;

struct Case {
  const char* name;
  AttentionShape shape;
  std::vector<RefSequence> seqs;  // tables filled in by the test
  bool fp8 = false;
  int block = 16;  // cache block size (not a power of two: the flash kernel divides)
  // Query values' standard deviation: > 1 spreads the scores so that a row's running max keeps
  // growing by more than the lazy rescale's headroom late in the keys (kFlashLazyRescale).
  float q_spread = 1.0f;
  bool sinks = false;  // random sink logits per query head
  int window = 0;      // sliding window (0: none)
};

// The flash kernel's forms under test (kernels/attention/paged_attention.h): v2, each option on
// its own where it changes the kernel, the default and everything on.
constexpr int kFlashForms[] = {
    0,
    kernels::kFlashFastSoftmax,
    kernels::kFlashChunk64,
    kernels::kFlashChunk64 | kernels::kFlashWideScores,
    kernels::kFlashShiftSlots,
    kernels::kFlashDefaultOptions,
    kernels::kFlashDefaultOptions | kernels::kFlashWideScores,
    kernels::kFlashDefaultOptions | kernels::kFlashLazyRescale,
    kernels::kFlashDefaultOptions | kernels::kFlashWideScores | kernels::kFlashLazyRescale,
    kernels::kFlashAllOptions & ~kernels::kFlashWideScores,
    kernels::kFlashAllOptions};

// The cache as FP8 codes and per-row scales, and the values they decode to.
struct Fp8Cache {
  std::vector<std::uint8_t> codes;
  std::vector<std::uint16_t> scales;
};
Fp8Cache quantize_cache(std::vector<float>& values, int D) {
  Fp8Cache out{std::vector<std::uint8_t>(values.size()),
               std::vector<std::uint16_t>(values.size() / std::size_t(D))};
  for (std::size_t r = 0; r < out.scales.size(); ++r) {
    const std::span<float> row(values.data() + r * std::size_t(D), std::size_t(D));
    const std::span<std::uint8_t> codes(out.codes.data() + r * std::size_t(D), std::size_t(D));
    out.scales[r] = kernels::quantize_kv_row(row, codes);
    for (std::size_t d = 0; d < row.size(); ++d)
      row[d] = kernels::dequantize_kv(codes[d], out.scales[r]);
  }
  return out;
}

template <typename T>
T* upload(const std::vector<T>& v) {
  T* p = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(v.size(), 1) * sizeof(T)));
  NIBBLE_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

void run_case(Case c, std::mt19937_64& rng, Results& results) {
  const int block = c.block, Hq = c.shape.q_heads, Hkv = c.shape.kv_heads, D = c.shape.head_dim;
  std::normal_distribution<float> normal;
  int blocks = 0;
  for (const auto& s : c.seqs) blocks += (s.start + s.count + block - 1) / block;
  blocks += 3;  // blocks no sequence owns
  std::vector<int> pool(static_cast<std::size_t>(blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  int used = 0;
  for (auto& s : c.seqs) {
    const int need = (s.start + s.count + block - 1) / block;
    s.table.assign(pool.begin() + used, pool.begin() + used + need);
    used += need;
    gpu_test::free_blocks_before_window(s, block, c.window);
  }
  const std::int64_t cache_rows = std::int64_t(blocks) * block;
  std::vector<std::uint16_t> kc(std::size_t(cache_rows * Hkv * D)), vc(kc.size());
  for (auto& x : kc) x = nvfp4::float_to_bf16(normal(rng));
  for (auto& x : vc) x = nvfp4::float_to_bf16(normal(rng));

  // Tiles as the engine lays them out: runs of at most rows_per_tile rows of one sequence.
  const int rows_per_tile = kernels::attention_rows_per_tile(c.shape);
  std::vector<AttentionTile> tiles;
  std::vector<std::int32_t> tables;
  std::int64_t T = 0;
  int max_position = 0, decode_tiles = 0;
  for (const auto& s : c.seqs) {
    const int offset = int(tables.size());
    tables.insert(tables.end(), s.table.begin(), s.table.end());
    for (int i = 0; i < s.count; i += rows_per_tile) {
      const int rows = std::min(rows_per_tile, s.count - i);
      tiles.push_back({std::int32_t(T + i), rows, s.start + i, offset});
      decode_tiles += rows == 1;
    }
    T += s.count;
    max_position = std::max(max_position, s.start + s.count - 1);
  }
  std::vector<std::uint16_t> q(std::size_t(T * Hq * D));
  for (auto& x : q) x = nvfp4::float_to_bf16(normal(rng) * c.q_spread);

  std::vector<float> qf(q.size()), kf(kc.size()), vf(vc.size());
  for (std::size_t i = 0; i < q.size(); ++i) qf[i] = nvfp4::bf16_to_float(q[i]);
  for (std::size_t i = 0; i < kc.size(); ++i) kf[i] = nvfp4::bf16_to_float(kc[i]);
  for (std::size_t i = 0; i < vc.size(); ++i) vf[i] = nvfp4::bf16_to_float(vc[i]);
  Fp8Cache k8, v8;
  if (c.fp8) {  // the reference sees what the cache holds
    k8 = quantize_cache(kf, D);
    v8 = quantize_cache(vf, D);
  }
  // Sinks around the scores' range: some heads give the sink most of the mass, some little.
  std::vector<float> sinks;
  if (c.sinks)
    for (int h = 0; h < Hq; ++h) sinks.push_back(1.0f + 2.0f * normal(rng));
  const double scale = 1.0 / std::sqrt(double(D));
  const std::vector<double> want = kernels::paged_attention_ref(qf, kf, vf, {Hq, Hkv, D, block},
                                                                c.seqs, scale, {sinks, c.window});

  auto* dq = upload(q);
  auto* dk = upload(kc);
  auto* dv = upload(vc);
  auto* dk8 = upload(k8.codes);
  auto* dv8 = upload(v8.codes);
  auto* dks = upload(k8.scales);
  auto* dvs = upload(v8.scales);
  auto* dt = upload(tiles);
  auto* db = upload(tables);
  float* dsinks = c.sinks ? upload(sinks) : nullptr;
  std::uint16_t* dout = nullptr;
  float* dwork = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&dout, q.size() * 2));
  kernels::PagedAttentionArgs a;
  a.q = dq;
  a.k_cache = c.fp8 ? nullptr : dk;
  a.v_cache = c.fp8 ? nullptr : dv;
  if (c.fp8) {
    a.k_cache8 = dk8;
    a.v_cache8 = dv8;
    a.k_scale = dks;
    a.v_scale = dvs;
  }
  a.block_tables = db;
  a.block_size = block;
  a.tiles = dt;
  a.num_tiles = int(tiles.size());
  a.shape = c.shape;
  a.scale = float(scale);
  a.out = dout;
  a.rows = int(T);
  a.max_position = max_position;
  a.decode_attention = 0;  // the kernels before it (decode_attention_check.h tests it)
  a.sinks = dsinks;
  a.window = c.window;
  // Keys in one block per tile, then split as far as the keys allow (a huge SM count), each with
  // the step's count of decode tiles known and unknown; steps with prefill tiles in every form of
  // the flash kernel. Steps of decodes only also run each decode kernel (the decode kernel, the
  // flash kernel) with the engine's decode split rule on an H100-sized GPU.
  const bool prefill_tiles = decode_tiles < a.num_tiles;
  std::size_t work_floats = 0;
  for (const int form : kFlashForms) {
    // Decode-only steps: the decode kernel's two block-table lookups (division, shift), and the
    // flash kernel's default forms (127 on sm_9x, 123 on sm_12x: flash_prefill.cu).
    if (!prefill_tiles && form != 0 && form != kernels::kFlashDefaultOptions &&
        form != kernels::kFlashAllOptions &&
        form != (kernels::kFlashAllOptions & ~kernels::kFlashWideScores))
      continue;
    a.flash_options = form;
    for (const int mode : {0, 1, 2, 3})
      for (const int known : {1, 0}) {
        const bool decode_rule = mode >= 2;
        if (decode_rule && a.num_tiles != T) break;
        const int sm_count = mode == 0 ? 0 : mode == 1 ? 1 << 20 : 132;
        a.flash_decode = decode_rule ? mode - 2 : 0;
        const int splits = decode_rule ? kernels::paged_decode_splits(c.shape, int(T), max_position,
                                                                      sm_count, a.flash_decode, 0)
                                       : kernels::paged_attention_splits(c.shape, a.num_tiles,
                                                                         max_position, sm_count);
        a.sm_count = sm_count;
        a.decode_tiles = known ? decode_tiles : -1;
        a.splits = decode_rule ? splits : 0;
        if (splits > 1) {
          a.workspace_floats = kernels::paged_attention_workspace_floats(c.shape, int(T), splits);
          if (a.workspace_floats > work_floats) {
            if (dwork != nullptr) NIBBLE_CUDA_CHECK(cudaFree(dwork));
            NIBBLE_CUDA_CHECK(cudaMalloc(&dwork, a.workspace_floats * 4));
            work_floats = a.workspace_floats;
          }
          a.workspace = dwork;
        }
        NIBBLE_CUDA_CHECK(cudaMemset(dout, 0xff, q.size() * 2));  // poison: NaN
        NIBBLE_CUDA_CHECK(kernels::paged_attention(a, nullptr));
        NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<std::uint16_t> got(q.size());
        NIBBLE_CUDA_CHECK(cudaMemcpy(got.data(), dout, q.size() * 2, cudaMemcpyDeviceToHost));
        const auto [err, bad] = gpu_test::relative_error(got, want);
        char detail[300];
        std::snprintf(
            detail, sizeof detail,
            "Hq %d Hkv %d D %d%s%s window %d block %d, %lld rows, %d tiles (%d decodes), splits "
            "%d%s%s, flash options %d: relative L2 %.3g, %zu not finite",
            Hq, Hkv, D, c.fp8 ? " fp8" : "", c.sinks ? " sinks" : "", c.window, block, (long long)T,
            a.num_tiles, decode_tiles, splits,
            decode_rule ? (a.flash_decode ? " (decode rule, flash)" : " (decode rule)") : "",
            known ? "" : ", decode count unknown", form, err, bad);
        // Peaked scores: P's BF16 rounding (2^-9 near 1) no longer averages out over many keys;
        // every form, old and new, measured 6.0e-3 on the FP8 cache (H200, 2026-11-26).
        results.record(err < (c.q_spread > 1.0f ? 1e-2 : 5e-3), c.name, detail);
        if (splits == 1 && sm_count > 0) break;
      }
  }
  for (void* p : {static_cast<void*>(dk8), static_cast<void*>(dv8), static_cast<void*>(dks),
                  static_cast<void*>(dvs)})
    cudaFree(p);
  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv),
                  static_cast<void*>(dt), static_cast<void*>(db), static_cast<void*>(dout),
                  static_cast<void*>(dwork), static_cast<void*>(dsinks)})
    cudaFree(p);
}

std::vector<Case> cases() {
  // Sequences: {start, count}: a chunk starting mid-sequence, a decode, a short prompt from 0.
  const std::vector<RefSequence> mixed{{300, 211, {}}, {700, 1, {}}, {0, 37, {}}};
  const std::vector<RefSequence> decodes{{0, 1, {}},   {31, 1, {}}, {32, 1, {}},
                                         {700, 1, {}}, {95, 1, {}}, {260, 1, {}}};
  const std::vector<RefSequence> prefill{{0, 333, {}}, {64, 64, {}}, {1, 5, {}}};
  std::vector<Case> out;
  for (const AttentionShape s :
       {AttentionShape{8, 8, 64}, AttentionShape{32, 8, 128}, AttentionShape{16, 2, 256},
        AttentionShape{16, 1, 128}, AttentionShape{32, 4, 128}, AttentionShape{64, 4, 128},
        AttentionShape{24, 8, 128}, AttentionShape{28, 4, 128}, AttentionShape{12, 2, 96},
        AttentionShape{4, 2, 8}, AttentionShape{16, 8, 256}, AttentionShape{32, 32, 64}}) {
    out.push_back({"mixed", s, mixed});
    out.push_back({"decodes", s, decodes});
    out.push_back({"prefill", s, prefill});
  }
  // FP8 caches where the kernels take them.
  const std::size_t bf16_cases = out.size();
  for (std::size_t i = 0; i < bf16_cases; ++i)
    if (kernels::paged_attention_fp8_supported(out[i].shape)) {
      Case c = out[i];
      c.fp8 = true;
      out.push_back(c);
    }
  // Long contexts: a chunk late in a long prompt, and a decode beside it.
  out.push_back({"long", AttentionShape{8, 2, 128}, {{9000, 70, {}}, {12000, 1, {}}}});
  out.push_back({"long", AttentionShape{16, 2, 256}, {{5000, 40, {}}}});
  out.push_back({"long", AttentionShape{8, 8, 64}, {{7000, 129, {}}}});
  out.push_back({"long", AttentionShape{32, 8, 128}, {{9000, 70, {}}, {12000, 1, {}}}, true});
  // Block sizes that are not powers of two (the flash kernel's division path) and a larger one;
  // chunks ending on and off the 64-key chunks of the head_dim 128 forms.
  out.push_back({"block 12", AttentionShape{32, 8, 128}, {{100, 93, {}}, {0, 64, {}}}, false, 12});
  out.push_back({"block 12", AttentionShape{32, 8, 128}, {{100, 93, {}}, {0, 64, {}}}, true, 12});
  out.push_back({"block 24", AttentionShape{8, 8, 64}, {{31, 97, {}}, {3, 1, {}}}, false, 24});
  out.push_back({"block 32", AttentionShape{16, 2, 128}, {{127, 129, {}}, {0, 2, {}}}, false, 32});
  // Scores of standard deviation ~8 (~12 in log2 units): the maxima of later keys pass the lazy
  // rescale's reference by more than 2^8, so its rare branch runs mid-row, not only on the first
  // block.
  for (const bool fp8 : {false, true})
    out.push_back(
        {"peaked", AttentionShape{32, 8, 128}, {{0, 300, {}}, {2000, 150, {}}}, fp8, 16, 8.0f});
  // gpt-oss's features on its shape (GQA 8, head_dim 64; window 128), the other head_dims' forms
  // (head_dim 128's paired loads and lazy rescale, 256, and the tile kernel at 96): sinks alone,
  // windows alone (of 128; of 37, cutting inside cache blocks and key chunks; of 1; past every
  // context), both; chunks whose tiles start before and after the window's reach, decodes beside
  // them, long prompts, BF16 and FP8 caches.
  const std::vector<RefSequence> windowed{{300, 211, {}}, {700, 1, {}}, {0, 37, {}}, {90, 80, {}},
                                          {2000, 1, {}},  {127, 1, {}}, {128, 1, {}}};
  struct Features {
    const char* name;
    bool sinks;
    int window;
  };
  for (const Features f :
       {Features{"sinks", true, 0}, Features{"window", false, 128},
        Features{"sinks + window", true, 128}, Features{"window 37", false, 37},
        Features{"window 1", true, 1}, Features{"window past context", true, 100000}})
    for (const AttentionShape s : {AttentionShape{64, 8, 64}, AttentionShape{32, 8, 128},
                                   AttentionShape{16, 2, 256}, AttentionShape{12, 2, 96}})
      for (const bool fp8 : {false, true}) {
        if (fp8 && !kernels::paged_attention_fp8_supported(s)) continue;
        // Every feature on gpt-oss's shape; both together and the window cutting inside blocks
        // and chunks on the others.
        const bool gpt_oss = s.q_heads == 64 && s.head_dim == 64;
        if (!gpt_oss && f.window != 37 && !(f.sinks && f.window == 128)) continue;
        for (const auto& seqs : {windowed, decodes, prefill}) {
          Case c{f.name, s, seqs, fp8};
          c.sinks = f.sinks;
          c.window = f.window;
          out.push_back(c);
        }
      }
  Case long_window{
      "sinks + window long", AttentionShape{64, 8, 64}, {{7000, 129, {}}, {8191, 1, {}}}};
  long_window.sinks = true;
  long_window.window = 128;
  out.push_back(long_window);
  long_window.fp8 = true;
  out.push_back(long_window);
  // Cache blocks of 12 (the division lookups; the window's first key inside a block).
  for (const bool fp8 : {false, true}) {
    Case c{"sinks + window block 12", AttentionShape{64, 8, 64}, windowed, fp8, 12};
    c.sinks = true;
    c.window = 128;
    out.push_back(c);
  }
  return out;
}

// rope_and_store_kv into an FP8 cache stores exactly the host quantisation of what it stores
// into a BF16 cache (same inputs, both runs), code for code and scale for scale.
void fp8_store_case(int kv_heads, int D, std::mt19937_64& rng, Results& results) {
  const int T = 37, q_heads = 2 * kv_heads, rows = 64;
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> q(std::size_t(T * q_heads * D)), k(std::size_t(T * kv_heads * D)),
      v(k.size());
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = nvfp4::float_to_bf16(normal(rng) * 3.0f);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(T));
  std::vector<std::int64_t> slots(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) {
    positions[std::size_t(t)] = 5 * t + 3;
    slots[std::size_t(t)] = (t * 17 + 5) % rows;  // distinct rows (17 and 64 coprime)
  }
  std::vector<double> inv_freq(std::size_t(D / 2));
  for (int i = 0; i < D / 2; ++i) inv_freq[std::size_t(i)] = std::pow(10000.0, -2.0 * i / D);
  auto* dq = upload(q);
  auto* dk = upload(k);
  auto* dv = upload(v);
  auto* dpos = upload(positions);
  auto* dslot = upload(slots);
  auto* dfreq = upload(inv_freq);
  const std::size_t cache = std::size_t(rows * kv_heads * D);
  std::uint16_t *kc = nullptr, *vc = nullptr, *ks = nullptr, *vs = nullptr;
  std::uint8_t *k8 = nullptr, *v8 = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&kc, cache * 2));
  NIBBLE_CUDA_CHECK(cudaMalloc(&vc, cache * 2));
  NIBBLE_CUDA_CHECK(cudaMalloc(&k8, cache));
  NIBBLE_CUDA_CHECK(cudaMalloc(&v8, cache));
  NIBBLE_CUDA_CHECK(cudaMalloc(&ks, cache / std::size_t(D) * 2));
  NIBBLE_CUDA_CHECK(cudaMalloc(&vs, cache / std::size_t(D) * 2));
  kernels::RopeStoreArgs a;
  a.q_in = dq;
  a.q_out = dq;
  a.k = dk;
  a.v = dv;
  a.q_stride = std::int64_t(q_heads) * D;
  a.kv_stride = std::int64_t(kv_heads) * D;
  a.inv_freq = dfreq;
  a.positions = dpos;
  a.slots = dslot;
  a.tokens = T;
  a.q_heads = q_heads;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  a.k_cache = kc;
  a.v_cache = vc;
  NIBBLE_CUDA_CHECK(kernels::rope_and_store_kv(a, nullptr));
  a.k_cache8 = k8;
  a.v_cache8 = v8;
  a.k_scale = ks;
  a.v_scale = vs;
  NIBBLE_CUDA_CHECK(kernels::rope_and_store_kv(a, nullptr));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  auto fetch = [](const auto* p, std::size_t n) {
    std::vector<std::remove_const_t<std::remove_pointer_t<decltype(p)>>> out(n);
    NIBBLE_CUDA_CHECK(cudaMemcpy(out.data(), p, n * sizeof(out[0]), cudaMemcpyDeviceToHost));
    return out;
  };
  std::size_t mismatches = 0, checked = 0;
  for (int which = 0; which < 2; ++which) {
    const auto bf = fetch(which ? vc : kc, cache);
    const auto codes = fetch(which ? v8 : k8, cache);
    const auto scales = fetch(which ? vs : ks, cache / std::size_t(D));
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < kv_heads; ++h) {
        const std::size_t row = std::size_t(slots[std::size_t(t)] * kv_heads + h);
        std::vector<float> values(static_cast<std::size_t>(D));
        std::vector<std::uint8_t> want(static_cast<std::size_t>(D));
        for (int d = 0; d < D; ++d)
          values[std::size_t(d)] = nvfp4::bf16_to_float(bf[row * std::size_t(D) + std::size_t(d)]);
        const std::uint16_t scale = kernels::quantize_kv_row(values, want);
        mismatches += scale != scales[row];
        for (int d = 0; d < D; ++d)
          mismatches += want[std::size_t(d)] != codes[row * std::size_t(D) + std::size_t(d)];
        checked += std::size_t(D) + 1;
      }
  }
  char detail[120];
  std::snprintf(detail, sizeof detail, "Hkv %d D %d: %zu of %zu codes and scales differ", kv_heads,
                D, mismatches, checked);
  results.record(mismatches == 0, "fp8 store", detail);
  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv),
                  static_cast<void*>(dpos), static_cast<void*>(dslot), static_cast<void*>(dfreq),
                  static_cast<void*>(kc), static_cast<void*>(vc), static_cast<void*>(k8),
                  static_cast<void*>(v8), static_cast<void*>(ks), static_cast<void*>(vs)})
    cudaFree(p);
}

}  // namespace
}  // namespace nibble

int main(int argc, char** argv) {
  const std::string why = nibble::gpu_test::no_gpu_reason();
  if (!why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return nibble::gpu_test::kSkipExitCode;
  }
  nibble::kernels::flash_enable_dev_forms();  // the forms the defaults do not pick, for the A/B
  if (argc > 1 && std::string(argv[1]) == "--bench")
    return nibble::gpu_test::run_reporting_failures(nibble::gpu_test::run_flash_bench, argc, argv);
  if (argc > 1 && std::string(argv[1]) == "--decode-bench")
    return nibble::gpu_test::run_reporting_failures(nibble::gpu_test::run_decode_bench, argc, argv);
  // --decode: the decode attention checks alone.
  const bool decode_only = argc > 1 && std::string(argv[1]) == "--decode";
  std::mt19937_64 rng(nibble::gpu_test::test_seed());
  nibble::gpu_test::Results results;
  try {
    if (!decode_only) {
      for (const auto& c : nibble::cases()) nibble::run_case(c, rng, results);
      for (const int D : {64, 128, 256}) nibble::fp8_store_case(D == 64 ? 8 : 2, D, rng, results);
    }
    nibble::gpu_test::run_decode_attention_checks(rng, results);
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  return results.exit_code();
}
