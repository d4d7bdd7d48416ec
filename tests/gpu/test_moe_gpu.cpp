// GPU checks of the device MoE kernels (kernels/moe/) against their CPU references:
//   * routing (moe_route) vs kernels/moe/moe_routing_ref.h: picks, row order, sources, counts,
//     offsets and the row-block table identical; weights within 1e-6 relative; over many
//     (T, E, k) incl. T = 1, T > 1000, E = 512 with k = 16, heavy ties, every token on one expert,
//     both sides of the one-block path's limit (1024 routed rows) and of its rank path's (8192
//     tokens x experts); the fused router + route (moe_router_route) likewise, its logits bitwise
//     those of their CPU reference (moe_router_logits_ref);
//   * the grouped W4A16 GEMM (w4a16_grouped_linear) vs the NVFP4 reference (nvfp4_ref.h
//     dequantization, products in double; MXFP4 experts: the OCP dequantization, in the
//     planner's kSlice16 and kM64 forms) for every routed row, every grouped tile form, with
//     experts of 0 rows, one expert holding every row, and rows per expert from 1 to thousands:
//     relative error <= 1e-2 (BF16 activations and outputs, /work/.library/device/METHOD.md);
//   * routing and the whole layer also in gpt-oss's order (top k logits, then a softmax over them)
//     and with MXFP4 experts;
//   * the whole layer (moe_experts: route, gather, grouped gate_up / gate + up, SiLU * up, grouped
//     down, weighted combine with the residual) vs a double-precision reference that rounds where
//     the device rounds to BF16: relative error <= 1e-2, and two runs bitwise identical; the
//     decode fusions (plan.fuse: gather + SiLU in the gate_up, combine in the down) bitwise equal
//     to the unfused path.
// Fresh random inputs each run (the seed is printed); outputs poisoned (NaN) before each launch.
// Exits 77 (ctest: skipped) when no GPU is present.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/moe/moe_experts.h"
#include "kernels/moe/moe_routing.h"
#include "kernels/moe/moe_routing_ref.h"
#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"
#include "kernels/nvfp4/w4a16_dev_tiles.h"
#include "kernels/nvfp4/w4a16_grouped.h"
#include "kernels/nvfp4/w4a16_layout.h"
#include "tests/gpu/gpu_check_support.h"
#include "tests/gpu/nvfp4_test_data.h"

namespace nibble::gpu_test {
namespace {

using nvfp4::bf16_bits;

float bf16_round(double v) {
  return nvfp4::bf16_to_float(nvfp4::float_to_bf16(float(v)));
}

// ---- routing ---------------------------------------------------------------------------------

enum class LogitKind { kRandom, kTied, kOneExpert };

std::vector<float> router_logits(std::mt19937_64& rng, std::int64_t tokens, int experts,
                                 LogitKind kind) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> level(0, 3);
  std::vector<float> v(std::size_t(tokens * experts));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (kind == LogitKind::kTied) {
      v[i] = 0.75f * float(level(rng));
    } else {
      v[i] = normal(rng);
      // One expert (the last) far above the rest for every token.
      if (kind == LogitKind::kOneExpert && i % std::size_t(experts) == std::size_t(experts - 1))
        v[i] = 30.0f;
    }
  }
  return v;
}

struct RouteCase {
  std::int64_t tokens;
  int experts, k;
  bool norm;
  int block_rows;
  LogitKind kind;
  bool top_k_first = false;  // gpt-oss's order: top k logits, then a softmax over them
  kernels::MoeScoring scoring() const {
    return {.norm_topk_prob = norm, .top_k_first = top_k_first};
  }
};

template <class P>
auto fetch(const P* p, std::size_t n) {
  std::vector<std::remove_cv_t<P>> v(n);
  NIBBLE_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(v[0]), cudaMemcpyDeviceToHost));
  return v;
}

// The device routing r of `logits` against moe_route_ref of the same logits; `extra` joins the
// verdict and the name gets `what`'s prefix.
void record_routing(Results& results, const char* what, const std::vector<float>& logits,
                    const RouteCase& c, const kernels::MoeRouting& r, bool extra = true,
                    const char* extra_detail = "") {
  const kernels::MoeRoutingRef ref =
      kernels::moe_route_ref(logits, c.tokens, c.experts, c.k, c.scoring(), c.block_rows);
  const std::size_t routed = std::size_t(c.tokens * c.k);
  const auto expert = fetch(r.expert, routed);
  const auto weight = fetch(r.weight, routed);
  const auto offsets = fetch(r.offsets, std::size_t(c.experts) + 1);
  const auto token = fetch(r.token, routed);
  const auto source = fetch(r.source, routed);
  const auto blocks = fetch(r.blocks, ref.blocks.size());
  bool blocks_equal = true;
  for (std::size_t b = 0; b < blocks.size(); ++b)
    blocks_equal &= blocks[b].expert == ref.blocks[b].expert &&
                    (ref.blocks[b].expert < 0 || (blocks[b].row_begin == ref.blocks[b].row_begin &&
                                                  blocks[b].row_end == ref.blocks[b].row_end));
  double worst_weight = 0.0;
  for (std::size_t i = 0; i < routed; ++i) {
    const double err = std::fabs(double(weight[i]) - ref.weight[i]) /
                       std::max(std::fabs(double(ref.weight[i])), 1e-30);
    worst_weight = std::isfinite(weight[i]) ? std::max(worst_weight, err) : INFINITY;
  }
  const bool ok = expert == ref.expert && offsets == ref.offsets && token == ref.token &&
                  source == ref.source && blocks_equal && worst_weight <= 1e-6 && extra;
  static const char* const kKinds[] = {"random", "tied", "one-expert"};
  char name[160], detail[300];
  std::snprintf(name, sizeof name, "%s_T%lld_E%d_k%d_%s_b%d_%s", what, (long long)c.tokens,
                c.experts, c.k,
                c.top_k_first ? "topk_softmax"
                : c.norm      ? "norm"
                              : "raw",
                c.block_rows, kKinds[int(c.kind)]);
  std::snprintf(detail, sizeof detail,
                "experts %s, offsets %s, rows %s, sources %s, blocks %s, weights %.2g rel%s",
                expert == ref.expert ? "=" : "DIFFER", offsets == ref.offsets ? "=" : "DIFFER",
                token == ref.token ? "=" : "DIFFER", source == ref.source ? "=" : "DIFFER",
                blocks_equal ? "=" : "DIFFER", worst_weight, extra_detail);
  results.record(ok, name, detail);
}

void check_routing(Results& results, std::mt19937_64& rng, const RouteCase& c) {
  const std::vector<float> logits = router_logits(rng, c.tokens, c.experts, c.kind);
  DeviceBuffer<float> d_logits(logits.size());
  d_logits.upload(logits);
  DeviceBuffer<std::int32_t> words(
      std::size_t(kernels::moe_routing_words(c.tokens, c.experts, c.k, c.block_rows)));
  words.poison();
  const kernels::MoeRouting r =
      kernels::moe_routing_views(words.ptr, c.tokens, c.experts, c.k, c.block_rows);
  NIBBLE_CUDA_CHECK(kernels::moe_route(d_logits.ptr, c.tokens, c.experts, c.k, c.scoring(),
                                       c.block_rows, r, nullptr));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  record_routing(results, "route", logits, c, r);
}

// ---- the router linear fused with the routing -----------------------------------------------

std::vector<bf16_bits> random_bf16(std::mt19937_64& rng, std::size_t count, float sigma = 1.0f);
std::vector<float> to_floats(const std::vector<bf16_bits>& v);

// moe_router_route: its logits vs double dot products (FP32 sums of BF16 products: relative
// error <= 1e-5) and bitwise vs moe_router_logits_ref (the CPU reference of their summation
// order); its routing vs moe_route_ref of the logits it wrote (exact), two launches bitwise
// identical, the clear region zeroed after each.
void check_router_route(Results& results, std::mt19937_64& rng, const RouteCase& c,
                        std::int64_t hidden) {
  const std::int64_t T = c.tokens, H = hidden;
  const auto x = random_bf16(rng, std::size_t(T * H));
  const auto w = random_bf16(rng, std::size_t(c.experts * H), 1.0f / std::sqrt(float(H)));
  // gpt-oss's order comes with its router's bias, added after the sum.
  const auto bias =
      c.top_k_first ? random_bf16(rng, std::size_t(c.experts)) : std::vector<bf16_bits>{};
  DeviceBuffer<bf16_bits> d_x(x.size()), d_w(w.size()),
      d_bias(std::max<std::size_t>(bias.size(), 1));
  d_x.upload(x);
  d_w.upload(w);
  if (!bias.empty()) d_bias.upload(bias);
  DeviceBuffer<float> d_logits(std::size_t(T * c.experts));
  DeviceBuffer<std::int32_t> words(
      std::size_t(kernels::moe_routing_words(T, c.experts, c.k, c.block_rows))),
      clear(37);
  const kernels::MoeRouting r =
      kernels::moe_routing_views(words.ptr, T, c.experts, c.k, c.block_rows);
  std::vector<std::vector<float>> logits;
  bool cleared_all = true;
  for (int run = 0; run < 2; ++run) {
    d_logits.poison();
    words.poison();
    clear.poison();
    NIBBLE_CUDA_CHECK(kernels::moe_router_route(
        d_x.ptr, d_w.ptr, T, int(H), c.experts, c.k, c.scoring(), c.block_rows, d_logits.ptr, r,
        nullptr, clear.ptr, 37, true, bias.empty() ? nullptr : d_bias.ptr));
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    logits.push_back(d_logits.download());
    const auto cleared = clear.download();
    cleared_all &=
        std::all_of(cleared.begin(), cleared.end(), [](std::int32_t v) { return v == 0; });
  }
  const auto xf = to_floats(x), wf = to_floats(w);
  std::vector<double> want(std::size_t(T * c.experts)), got(want.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (int e = 0; e < c.experts; ++e) {
      double sum = 0.0;
      for (std::int64_t h = 0; h < H; ++h)
        sum += double(xf[std::size_t(t * H + h)]) * wf[std::size_t(e * H + h)];
      want[std::size_t(t * c.experts + e)] =
          sum + (bias.empty() ? 0.0 : double(nvfp4::bf16_to_float(bias[std::size_t(e)])));
      got[std::size_t(t * c.experts + e)] = logits[0][std::size_t(t * c.experts + e)];
    }
  const double err = relative_error(want, got);
  const bool same = logits[0] == logits[1];
  const bool bitwise =
      logits[0] == kernels::moe_router_logits_ref(x, w, T, int(H), c.experts, bias);
  char detail[200];
  std::snprintf(detail, sizeof detail, "; H %lld, logits rel %.2g%s, runs %s, clear %s",
                (long long)H, err, bitwise ? ", = CPU order" : ", NOT the CPU order's bits",
                same ? "identical" : "DIFFER", cleared_all ? "zero" : "NOT ZERO");
  record_routing(results, "router_route", logits[0], c, r,
                 err <= 1e-5 && same && cleared_all && bitwise, detail);
}

// ---- experts' weights --------------------------------------------------------------------------

// A random MXFP4 expert weight as gpt-oss ships it (`*_blocks` [n, k/2], `*_scales` [n, k/32]):
// random codes, E8M0 exponents 2^-6 .. 2^-3 (values up to 0.75, as a trained projection's), and
// its OCP dequantization, e2m1 * 2^(e - 127).
struct Mxfp4Matrix {
  std::vector<std::uint8_t> packed, e8m0;
  std::vector<float> dense;
};
Mxfp4Matrix random_mxfp4(std::mt19937_64& rng, std::int64_t n, std::int64_t k) {
  Mxfp4Matrix m;
  m.packed.resize(std::size_t(n * k / 2));
  m.e8m0.resize(std::size_t(n * k / 32));
  std::uniform_int_distribution<int> exponent(127 - 6, 127 - 3);
  for (auto& b : m.packed) b = std::uint8_t(rng());
  for (auto& e : m.e8m0) e = std::uint8_t(exponent(rng));
  m.dense.resize(std::size_t(n * k));
  for (std::int64_t i = 0; i < n * k; ++i) {
    const std::uint8_t byte = m.packed[std::size_t(i / 2)];
    m.dense[std::size_t(i)] = nvfp4::e2m1_to_float(i % 2 == 0 ? byte & 0xF : byte >> 4) *
                              std::ldexp(1.0f, int(m.e8m0[std::size_t(i / 32)]) - 127);
  }
  return m;
}

using nvfp4::W4A16Format;

// Every expert's [n, k] projection: the dequantized reference and the device table.
struct ExpertSet {
  std::int64_t n = 0, k = 0;
  std::vector<std::vector<float>> dense;  // [E][n * k]
  std::vector<std::unique_ptr<DeviceBuffer<std::uint8_t>>> bytes;
  std::unique_ptr<DeviceBuffer<kernels::W4A16DeviceWeight>> table;
  kernels::W4A16GroupedWeights view;

  ExpertSet(std::mt19937_64& rng, int experts, std::int64_t n_, std::int64_t k_,
            W4A16Format format = W4A16Format::kNvfp4)
      : n(n_), k(k_) {
    std::vector<kernels::W4A16DeviceWeight> host;
    for (int e = 0; e < experts; ++e) {
      nvfp4::W4A16Weight r;
      if (format == W4A16Format::kMxfp4) {
        Mxfp4Matrix m = random_mxfp4(rng, n, k);
        r = nvfp4::repack_mxfp4_for_w4a16(m.packed, m.e8m0, n, k);
        dense.push_back(std::move(m.dense));
      } else {
        const nvfp4::QuantizedMatrix q = random_weight(rng, n, k);
        dense.push_back(nvfp4::dequantize_matrix(q));
        r = nvfp4::repack_for_w4a16(q.packed, q.scales, n, k, q.global_factor);
      }
      bytes.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(r.tiles.size()));
      bytes.back()->upload(r.tiles);
      auto* tiles = bytes.back()->ptr;
      bytes.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(r.scales.size()));
      bytes.back()->upload(r.scales);
      host.push_back({tiles, bytes.back()->ptr, r.n, r.k, r.n_padded, r.k_padded, r.global_factor,
                      r.k_major, r.format});
    }
    table = std::make_unique<DeviceBuffer<kernels::W4A16DeviceWeight>>(host.size());
    table->upload(host);
    view = {table->ptr, host[0]};
  }
  // y = x W_e^T in double (x already BF16-exact floats).
  void product(int e, const float* x, double* y) const {
    const std::vector<float>& w = dense[std::size_t(e)];
    for (std::int64_t c = 0; c < n; ++c) {
      double sum = 0.0;
      for (std::int64_t i = 0; i < k; ++i) sum += double(x[i]) * w[std::size_t(c * k + i)];
      y[c] = sum;
    }
  }
};

std::vector<bf16_bits> random_bf16(std::mt19937_64& rng, std::size_t count, float sigma) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<bf16_bits> v(count);
  for (auto& x : v) x = nvfp4::float_to_bf16(normal(rng));
  return v;
}

std::vector<float> to_floats(const std::vector<bf16_bits>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = nvfp4::bf16_to_float(v[i]);
  return f;
}

// ---- the grouped GEMM ------------------------------------------------------------------------

struct GroupedCase {
  std::int64_t tokens;
  int experts, k;
  std::int64_t n, kdim;
  kernels::W4A16Tile tile;
  int block_rows;
  LogitKind kind;
  W4A16Format format = W4A16Format::kNvfp4;
};

void check_grouped(Results& results, std::mt19937_64& rng, const GroupedCase& c) {
  const ExpertSet w(rng, c.experts, c.n, c.kdim, c.format);
  const std::vector<float> logits = router_logits(rng, c.tokens, c.experts, c.kind);
  const kernels::MoeRoutingRef ref =
      kernels::moe_route_ref(logits, c.tokens, c.experts, c.k, true, c.block_rows);
  const std::int64_t rows = c.tokens * c.k;
  const auto x = random_bf16(rng, std::size_t(rows * c.kdim));
  const auto xf = to_floats(x);
  DeviceBuffer<bf16_bits> dx(x.size()), out(std::size_t(rows * c.n));
  dx.upload(x);
  DeviceBuffer<kernels::MoeRowBlock> blocks(ref.blocks.size());
  blocks.upload(ref.blocks);
  out.poison();
  NIBBLE_CUDA_CHECK(kernels::w4a16_grouped_linear(dx.ptr, rows, w.view, blocks.ptr,
                                                  std::int64_t(ref.blocks.size()), c.block_rows,
                                                  c.tile, out.ptr, nullptr));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got_bits = out.download();
  // Expert of each routed row, from the offsets.
  std::vector<int> row_expert(static_cast<std::size_t>(rows));
  for (int e = 0; e < c.experts; ++e)
    for (std::int32_t r = ref.offsets[std::size_t(e)]; r < ref.offsets[std::size_t(e) + 1]; ++r)
      row_expert[std::size_t(r)] = e;
  std::vector<double> want(std::size_t(rows * c.n)), got(want.size());
  parallel_for(rows, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r)
      w.product(row_expert[std::size_t(r)], xf.data() + r * c.kdim, want.data() + r * c.n);
  });
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = nvfp4::bf16_to_float(got_bits[i]);
  const double err = relative_error(want, got);
  int empty = 0, largest = 0;
  for (int e = 0; e < c.experts; ++e) {
    const int count = ref.offsets[std::size_t(e) + 1] - ref.offsets[std::size_t(e)];
    empty += count == 0;
    largest = std::max(largest, count);
  }
  char name[160], detail[160];
  std::snprintf(name, sizeof name, "grouped_T%lld_E%d_k%d_n%lld_k%lld_tile%d_b%d%s",
                (long long)c.tokens, c.experts, c.k, (long long)c.n, (long long)c.kdim, int(c.tile),
                c.block_rows, c.format == W4A16Format::kMxfp4 ? "_mxfp4" : "");
  std::snprintf(detail, sizeof detail, "rel %.3g (%d empty experts, largest %d rows)", err, empty,
                largest);
  results.record(err <= 1e-2, name, detail);
}

// ---- the whole layer ---------------------------------------------------------------------------

struct LayerCase {
  std::int64_t tokens;
  int experts, k;
  std::int64_t hidden, inter;
  bool fused, norm;
  LogitKind kind = LogitKind::kRandom;
  bool top_k_first = false;
  W4A16Format format = W4A16Format::kNvfp4;
  // gpt-oss's experts: interleaved gate_up rows, biases, the clamped SwiGLU (alpha 1.702, limit
  // 7). The fused decode paths only (the unfused one refuses it): every run takes them.
  bool clamped = false;
};

void check_layer(Results& results, std::mt19937_64& rng, const LayerCase& c) {
  const std::int64_t T = c.tokens, H = c.hidden, I = c.inter, routed = T * c.k;
  std::unique_ptr<ExpertSet> gate_up, gate, up;
  if (c.fused) {
    gate_up = std::make_unique<ExpertSet>(rng, c.experts, 2 * I, H, c.format);
  } else {
    gate = std::make_unique<ExpertSet>(rng, c.experts, I, H, c.format);
    up = std::make_unique<ExpertSet>(rng, c.experts, I, H, c.format);
  }
  const ExpertSet down(rng, c.experts, H, I, c.format);
  kernels::MoeExpertWeights w;
  w.fused = c.fused;
  if (c.fused) {
    w.gate_up = gate_up->view;
  } else {
    w.gate = gate->view;
    w.up = up->view;
  }
  w.down = down.view;

  const std::vector<float> logits = router_logits(rng, T, c.experts, c.kind);
  const auto hidden = random_bf16(rng, std::size_t(T * H));
  const auto residual = random_bf16(rng, std::size_t(T * H));
  DeviceBuffer<float> d_logits(logits.size());
  d_logits.upload(logits);
  DeviceBuffer<bf16_bits> d_hidden(hidden.size()), d_residual(residual.size()),
      d_out(std::size_t(T * H)), d_routed(std::size_t(routed * H)),
      d_projected(std::size_t(routed * 2 * I)), d_middle(std::size_t(routed * I)),
      d_expert_out(std::size_t(routed * H));
  d_hidden.upload(hidden);
  d_residual.upload(residual);
  DeviceBuffer<std::int32_t> words(std::size_t(kernels::moe_routing_words(T, c.experts, c.k, 1))),
      arrivals(std::size_t(kernels::moe_arrival_words(T, H)));
  // gpt-oss's biases (large enough that the clamps at +-limit bite: sums of ~1 plus biases of ~3).
  const auto gate_up_bias = random_bf16(rng, std::size_t(c.experts * 2 * I), 3.0f);
  const auto down_bias = random_bf16(rng, std::size_t(c.experts * H), 0.5f);
  DeviceBuffer<bf16_bits> d_gate_up_bias(gate_up_bias.size()), d_down_bias(down_bias.size());
  d_gate_up_bias.upload(gate_up_bias);
  d_down_bias.upload(down_bias);
  const kernels::W4A16ClampedSwiglu swiglu{.gate_up_bias = d_gate_up_bias.ptr,
                                           .down_bias = d_down_bias.ptr,
                                           .alpha = 1.702f,
                                           .limit = 7.0f};
  kernels::MoeExpertsArgs a{.router_logits = d_logits.ptr,
                            .hidden = d_hidden.ptr,
                            .residual = d_residual.ptr,
                            .out = d_out.ptr,
                            .tokens = T,
                            .experts = c.experts,
                            .k = c.k,
                            .hidden_size = int(H),
                            .norm_topk_prob = c.norm,
                            .top_k_first = c.top_k_first,
                            .routing_words = words.ptr,
                            .routed = d_routed.ptr,
                            .arrivals = arrivals.ptr,
                            .projected = d_projected.ptr,
                            .middle = d_middle.ptr,
                            .expert_out = d_expert_out.ptr,
                            .clamped_swiglu = c.clamped ? &swiglu : nullptr};
  // Runs 0, 1: the unfused path; 2, 3: the decode fusions (where the plan and shapes allow them),
  // the arrival counts poisoned too (the route must zero them); 4 (T = 1): the fusions with the
  // token routed inside the expert GEMMs, which must also leave the route's arrays bitwise; 5, 6
  // (T = 1): gate_up and down as one launch (MoeGroupedPlan::one_launch), first from zeroed
  // arrival counts, which it must leave zero, then from what that run left.
  kernels::MoeGroupedPlan plan = kernels::plan_moe_experts(T, c.experts, c.k);
  const bool route_in_gemm = plan.route_in_gemm, one_launch = plan.one_launch;
  plan.fuse_router = false;
  plan.route_in_gemm = false;
  plan.one_launch = false;
  std::vector<std::vector<bf16_bits>> runs;
  std::vector<std::int32_t> routing_words;
  enum class Counts { kPoison, kZero, kAsLeft };
  auto run_layer = [&](Counts counts = Counts::kPoison) {
    for (auto* b : {&d_out, &d_routed, &d_projected, &d_middle, &d_expert_out}) b->poison();
    words.poison();
    if (counts == Counts::kPoison) arrivals.poison();
    // Poisoned: the route zeroes the combine's counts itself; the one launch needs zeros.
    if (counts == Counts::kZero)
      NIBBLE_CUDA_CHECK(cudaMemset(arrivals.ptr, 0, arrivals.count * sizeof(std::int32_t)));
    NIBBLE_CUDA_CHECK(kernels::moe_experts(w, a, plan, nullptr));
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    runs.push_back(d_out.download());
    routing_words = words.download();
  };
  for (int run = 0; run < 4; ++run) {
    plan.fuse = run >= 2 || c.clamped;
    run_layer();
  }
  const bool fused = kernels::moe_experts_fused(w, plan);
  bool in_gemm_same = true, one_launch_same = true;
  if (fused && route_in_gemm) {
    const std::vector<std::int32_t> routed_by_launch = routing_words;
    plan.route_in_gemm = true;
    run_layer();
    in_gemm_same = runs.back() == runs[2] && routing_words == routed_by_launch;
    if (one_launch) {
      plan.one_launch = true;
      for (const Counts counts : {Counts::kZero, Counts::kAsLeft}) {
        run_layer(counts);
        const std::vector<std::int32_t> left = arrivals.download();
        one_launch_same &=
            runs.back() == runs[2] && routing_words == routed_by_launch &&
            std::all_of(left.begin(), left.end(), [](std::int32_t v) { return v == 0; });
      }
      plan.one_launch = false;
    }
    plan.route_in_gemm = false;
  }
  // The fused router (where it applies): the layer from a random BF16 router's own logits, then
  // the same layer fed those logits (left in d_logits) without it: the same bits.
  const auto router = random_bf16(rng, std::size_t(c.experts * H), 1.0f / std::sqrt(float(H)));
  DeviceBuffer<bf16_bits> d_router(router.size());
  d_router.upload(router);
  plan.fuse_router = true;
  const bool router_fused = kernels::moe_router_fused(w, plan, T, int(H), true);
  bool router_same = true;
  auto router_then_logits = [&] {
    d_logits.poison();
    a.router_weight = d_router.ptr;
    run_layer();
    a.router_weight = nullptr;
    run_layer();
    router_same &= runs[runs.size() - 2] == runs.back();
  };
  if (router_fused) router_then_logits();
  if (router_fused && route_in_gemm) {  // the router linear alone, then the GEMMs routing
    plan.route_in_gemm = true;
    router_then_logits();
    plan.route_in_gemm = false;
  }
  if (router_fused && route_in_gemm && one_launch) {  // and as one launch
    plan.route_in_gemm = plan.one_launch = true;
    NIBBLE_CUDA_CHECK(cudaMemset(arrivals.ptr, 0, arrivals.count * sizeof(std::int32_t)));
    d_logits.poison();
    a.router_weight = d_router.ptr;
    run_layer(Counts::kAsLeft);
    a.router_weight = nullptr;
    run_layer(Counts::kAsLeft);
    router_same &= runs[runs.size() - 2] == runs.back();
    plan.route_in_gemm = plan.one_launch = false;
  }

  // Reference: the device's BF16 roundings (gate_up / gate and up, the SiLU product, each
  // expert's output, the result), everything else in double.
  const kernels::MoeRoutingRef ref = kernels::moe_route_ref(
      logits, T, c.experts, c.k,
      kernels::MoeScoring{.norm_topk_prob = c.norm, .top_k_first = c.top_k_first}, 1);
  const auto hf = to_floats(hidden), rf = to_floats(residual);
  const auto gate_up_bias_f = to_floats(gate_up_bias), down_bias_f = to_floats(down_bias);
  std::vector<double> want(std::size_t(T * H)), got(want.size());
  parallel_for(T, [&](std::int64_t b, std::int64_t e) {
    std::vector<double> g(static_cast<std::size_t>(2 * I)), u(static_cast<std::size_t>(I)),
        y(static_cast<std::size_t>(H));
    std::vector<float> mid(static_cast<std::size_t>(I));
    for (std::int64_t t = b; t < e; ++t) {
      std::vector<double> acc(static_cast<std::size_t>(H), 0.0);
      for (int j = 0; j < c.k; ++j) {
        const int ex = ref.expert[std::size_t(t * c.k + j)];
        const float* x = hf.data() + t * H;
        if (c.clamped) {  // cpu_ops clamped_swiglu_value on the device's roundings
          gate_up->product(ex, x, g.data());
          const float* bias = gate_up_bias_f.data() + std::size_t(ex) * 2 * I;
          for (std::int64_t i = 0; i < I; ++i) {
            const double gi = std::min(bf16_round(g[std::size_t(2 * i)] + bias[2 * i]), 7.0f);
            const double ui =
                std::clamp(bf16_round(g[std::size_t(2 * i + 1)] + bias[2 * i + 1]), -7.0f, 7.0f);
            mid[std::size_t(i)] = bf16_round((ui + 1.0) * (gi / (1.0 + std::exp(-1.702 * gi))));
          }
        } else if (c.fused) {
          gate_up->product(ex, x, g.data());
          std::copy(g.begin() + I, g.end(), u.begin());
        } else {
          gate->product(ex, x, g.data());
          up->product(ex, x, u.data());
        }
        for (std::int64_t i = 0; i < I && !c.clamped; ++i) {
          const double gi = bf16_round(g[std::size_t(i)]), ui = bf16_round(u[std::size_t(i)]);
          mid[std::size_t(i)] = bf16_round(gi / (1.0 + std::exp(-gi)) * ui);
        }
        down.product(ex, mid.data(), y.data());
        const float* bias = down_bias_f.data() + std::size_t(ex) * H;
        for (std::int64_t h = 0; h < H; ++h)
          acc[std::size_t(h)] +=
              double(ref.weight[std::size_t(t * c.k + j)]) *
              bf16_round(y[std::size_t(h)] + (c.clamped ? double(bias[h]) : 0.0));
      }
      for (std::int64_t h = 0; h < H; ++h)
        want[std::size_t(t * H + h)] = rf[std::size_t(t * H + h)] + acc[std::size_t(h)];
    }
  });
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = nvfp4::bf16_to_float(runs[0][i]);
  const double err = relative_error(want, got);
  const bool same = runs[0] == runs[1] && runs[2] == runs[3];
  // The fusions keep every rounding and summation order: the same bits as the unfused path.
  const bool fused_same = runs[2] == runs[0];
  char name[160], detail[200];
  std::snprintf(name, sizeof name, "layer_T%lld_E%d_k%d_H%lld_I%lld_%s_%s%s%s%s", (long long)T,
                c.experts, c.k, (long long)H, (long long)I, c.fused ? "fused" : "gate+up",
                c.top_k_first ? "topk_softmax"
                : c.norm      ? "norm"
                              : "raw",
                c.kind == LogitKind::kOneExpert ? "_one_expert" : "",
                c.format == W4A16Format::kMxfp4 ? "_mxfp4" : "",
                c.clamped ? "_clamped_swiglu" : "");
  std::snprintf(detail, sizeof detail,
                "rel %.3g, tile %d x %d rows, two runs %s, decode fusions %s: %s, fused router %s, "
                "routed in the GEMMs %s, one launch %s",
                err, int(plan.tile), plan.block_rows, same ? "bitwise identical" : "DIFFER",
                fused ? "on" : "not applicable", fused_same ? "same bits" : "DIFFERENT BITS",
                !router_fused ? "not applicable"
                : router_same ? "same bits"
                              : "DIFFERENT BITS",
                !(fused && route_in_gemm) ? "not applicable"
                : in_gemm_same            ? "same bits and routing"
                                          : "DIFFERENT",
                !(fused && route_in_gemm && one_launch) ? "not applicable"
                : one_launch_same                       ? "same bits and routing, counts left zero"
                                                        : "DIFFERENT");
  results.record(
      err <= 1e-2 && same && fused_same && router_same && in_gemm_same && one_launch_same, name,
      detail);
}

int run(int argc, char** argv) {
  const std::string reason = no_gpu_reason();
  if (!reason.empty()) {
    std::printf("SKIP: %s; the MoE GPU checks need a CUDA GPU\n", reason.c_str());
    return kSkipExitCode;
  }
  bool quick = false;
  for (int i = 1; i < argc; ++i) quick |= std::string(argv[i]) == "--quick";
  const std::uint64_t seed = std::random_device{}() ^ (std::uint64_t(std::random_device{}()) << 32);
  std::printf("seed %llu%s\n", (unsigned long long)seed, quick ? " (quick)" : "");
  std::mt19937_64 rng(seed);
  Results results;
  kernels::w4a16_enable_dev_tiles();  // the grouped forms the MoE planner never picks

  using K = LogitKind;
  const RouteCase routes[] = {
      {1, 8, 2, true, 8, K::kRandom},
      {1, 128, 8, true, 8, K::kRandom},
      {3, 8, 8, true, 16, K::kTied},
      {7, 60, 4, false, 1, K::kTied},
      {33, 128, 8, true, 64, K::kTied},
      {64, 512, 16, true, 8, K::kRandom},
      {100, 512, 1, false, 3, K::kTied},
      {257, 128, 8, true, 64, K::kOneExpert},
      {1000, 128, 8, true, 64, K::kRandom},
      {129, 128, 8, true, 8, K::kTied},
      {1500, 64, 6, false, 16, K::kTied},
      {4096, 128, 8, true, 64, K::kRandom},
      {5, 1, 1, true, 8, K::kRandom},
      // both sides of the rank path's limit (8192 tokens x experts), ties included
      {64, 128, 8, true, 8, K::kTied},
      {65, 128, 8, true, 8, K::kTied},
      {8, 128, 8, false, 8, K::kOneExpert},
      // gpt-oss's order (top k logits, then softmax over the k): 20b's 32 experts and 120b's 128,
      // top 4, the one-block path (decode, the rank path and the warp path past 8192 pairs) and
      // the three-launch path past 1024 routed rows, ties included
      {1, 32, 4, false, 8, K::kRandom, true},
      {1, 128, 4, false, 8, K::kTied, true},
      {64, 128, 4, false, 8, K::kTied, true},
      {100, 128, 4, false, 8, K::kRandom, true},
      {2048, 32, 4, false, 64, K::kRandom, true},
      {300, 32, 4, true, 16, K::kTied, true},
      // past kRankPicksMaxExperts the one-block route picks by warp arg-max rounds: Qwen3-Next's
      // 512 experts, top 10, at decode sizes, ties included; the top-k-first order at 200
      {1, 512, 10, true, 8, K::kTied},
      {8, 512, 10, true, 8, K::kTied},
      {16, 512, 10, false, 16, K::kRandom},
      {4, 200, 6, false, 8, K::kTied, true},
  };
  for (const RouteCase& c : routes) check_routing(results, rng, c);
  // The fused router: T up to kMoeRouterMaxTokens, H a multiple of 8 (not of 256: a lane's last
  // piece partial), E not a multiple of the 8 experts per block, E = 512 with k = 16, H past the
  // spread router's fetched-ahead pieces (6152: 769 pieces, the last round partial).
  const std::pair<RouteCase, std::int64_t> router_routes[] = {
      {{1, 128, 8, true, 8, K::kRandom}, 2048},
      {{4, 128, 8, true, 8, K::kRandom}, 2048},
      {{8, 128, 8, true, 16, K::kRandom}, 2048},
      {{3, 60, 4, false, 1, K::kRandom}, 136},
      {{8, 512, 16, true, 8, K::kRandom}, 520},
      {{1, 512, 10, true, 8, K::kTied}, 2048},  // Qwen3-Next's router at decode
      {{8, 512, 10, true, 8, K::kTied}, 2048},
      {{1, 8, 2, true, 8, K::kRandom}, 8},
      {{5, 1, 1, true, 8, K::kRandom}, 64},
      {{7, 33, 3, true, 8, K::kRandom}, 4096},
      {{2, 128, 8, true, 8, K::kTied}, 6152},
      {{1, 32, 4, false, 8, K::kRandom, true}, 2880},  // gpt-oss-20b's router (its bias: none here)
  };
  for (const auto& [c, hidden] : router_routes) check_router_route(results, rng, c, hidden);

  using kernels::W4A16Tile;
  std::vector<GroupedCase> grouped = {
      // decode-like: 1 row per expert, empty experts
      {1, 128, 8, 1536, 2048, W4A16Tile::kSlice16, 8, K::kRandom},
      {1, 128, 8, 2048, 768, W4A16Tile::kSlice16, 8, K::kRandom},
      {5, 8, 2, 200, 208, W4A16Tile::kSlice16, 8, K::kRandom},
      {3, 16, 4, 130, 1040, W4A16Tile::kSlice32, 8, K::kTied},
      {9, 8, 8, 256, 128, W4A16Tile::kSlice16Wide, 16, K::kRandom},
      {40, 8, 4, 257, 80, W4A16Tile::kSlice64, 16, K::kOneExpert},
      // row tiles: every tile form up to 64 rows, odd shapes, one expert with every row
      {70, 8, 2, 300, 528, W4A16Tile::kM64, 64, K::kRandom},
      {130, 4, 4, 129, 208, W4A16Tile::kM64, 64, K::kOneExpert},
      {50, 8, 2, 256, 1008, W4A16Tile::kM16Swap, 16, K::kRandom},
      {33, 8, 2, 128, 96, W4A16Tile::kM8, 8, K::kTied},
      {60, 16, 2, 384, 256, W4A16Tile::kM16, 16, K::kRandom},
      {60, 16, 2, 384, 256, W4A16Tile::kM16Wide, 16, K::kRandom},
      {1100, 16, 4, 256, 512, W4A16Tile::kM64, 64, K::kRandom},
      {1100, 16, 4, 256, 512, W4A16Tile::kSlice16, 16, K::kRandom},
  };
  // MXFP4 experts (gpt-oss) in the planner's grouped forms: decode slices and the 64-row tile,
  // gpt-oss-20b's gate_up [5760, 2880] and down [2880, 2880] with 32 experts, top 4, K a multiple
  // of 32 but not of 64 (a padded k step)
  for (const GroupedCase& c : std::initializer_list<GroupedCase>{
           {1, 32, 4, 5760, 2880, W4A16Tile::kSlice16, 8, K::kRandom, W4A16Format::kMxfp4},
           {1, 32, 4, 2880, 2880, W4A16Tile::kSlice16, 8, K::kRandom, W4A16Format::kMxfp4},
           {5, 8, 2, 200, 224, W4A16Tile::kSlice16, 8, K::kTied, W4A16Format::kMxfp4},
           {12, 8, 2, 300, 96, W4A16Tile::kSlice16, 16, K::kRandom, W4A16Format::kMxfp4},
           {70, 8, 2, 300, 544, W4A16Tile::kM64, 64, K::kRandom, W4A16Format::kMxfp4},
           {512, 32, 4, 5760, 2880, W4A16Tile::kM64, 64, K::kRandom, W4A16Format::kMxfp4},
       })
    grouped.push_back(c);
  if (!quick) {
    grouped.push_back({8, 128, 8, 1536, 2048, W4A16Tile::kSlice16, 16, K::kRandom});
    grouped.push_back({64, 128, 8, 2048, 768, W4A16Tile::kM64, 64, K::kRandom});
  }
  for (const GroupedCase& c : grouped) check_grouped(results, rng, c);

  std::vector<LayerCase> layers = {
      {1, 8, 2, 256, 128, true, true},
      {1, 128, 8, 512, 192, true, true},
      {13, 8, 8, 256, 128, false, true},
      {40, 8, 2, 256, 128, true, false},
      {300, 16, 4, 256, 128, true, true},
      {1030, 8, 2, 128, 64, false, true},
      // the decode fusions: H not a multiple of 32 (slices past n), I not a multiple of 32, 9..16
      // rows per row block (two x fragments), every token on one expert, T k > 1024 routed rows
      // (NVFP4 needs every K, H and I here, a multiple of 16)
      {3, 8, 2, 336, 80, true, true},
      {2, 8, 2, 256, 48, true, true},
      {24, 8, 4, 320, 96, true, true, K::kOneExpert},
      {9, 16, 8, 208, 48, true, false},
      {64, 128, 8, 256, 128, true, true},
      {200, 64, 8, 128, 64, true, true},
      {1100, 128, 1, 128, 32, true, true},
      // one token routed inside the expert GEMMs: tied logits, E = 512 with k = 16, H off 32
      {1, 64, 8, 256, 48, true, true, K::kTied},
      {1, 512, 16, 336, 80, true, false},
      // Qwen3-Next's 512 experts, top 10, with ties (the arg-max rounds inside the GEMMs at
      // T = 1, in the route launch at 8), and 256 experts in gpt-oss's order
      {1, 512, 10, 256, 64, true, true, K::kTied},
      {8, 512, 10, 256, 64, true, true, K::kTied},
      {1, 256, 4, 256, 128, true, false, K::kTied, true, W4A16Format::kMxfp4, true},
      // gpt-oss's routing order through the layer: T = 1 routed inside the GEMMs, small batches
      {1, 32, 4, 256, 128, true, false, K::kRandom, true},
      {1, 32, 4, 256, 128, true, false, K::kTied, true},
      {8, 32, 4, 256, 128, true, false, K::kRandom, true},
      {300, 32, 4, 256, 128, true, false, K::kRandom, true},
      // MXFP4 experts through the whole layer (fused gate_up, the decode fusions at T = 1 and 8,
      // the 64-row tiles at 300), gpt-oss's routing
      {1, 32, 4, 256, 128, true, false, K::kRandom, true, W4A16Format::kMxfp4},
      {8, 32, 4, 320, 96, true, false, K::kRandom, true, W4A16Format::kMxfp4},
      {300, 32, 4, 256, 128, true, false, K::kRandom, true, W4A16Format::kMxfp4},
      {3, 8, 2, 256, 64, false, true, K::kRandom, false, W4A16Format::kMxfp4},
      // gpt-oss's experts whole: MXFP4, interleaved gate_up, biases, the clamped SwiGLU, top k
      // then softmax; T = 1 (routed in the GEMMs, one launch), 3 and 8 (the route launch, 8- and
      // 16-row blocks); NVFP4 with the same activation once
      {1, 32, 4, 256, 128, true, false, K::kRandom, true, W4A16Format::kMxfp4, true},
      {3, 32, 4, 320, 96, true, false, K::kTied, true, W4A16Format::kMxfp4, true},
      {8, 8, 4, 256, 64, true, false, K::kRandom, true, W4A16Format::kMxfp4, true},
      {2, 8, 2, 256, 128, true, true, K::kRandom, false, W4A16Format::kNvfp4, true},
      // and at a prefill size, whose kM64 plan does not fuse: the fusions with 16-row blocks
      {300, 32, 4, 256, 128, true, false, K::kRandom, true, W4A16Format::kMxfp4, true},
  };
  if (!quick) {
    // Qwen3-30B-A3B's MoE layer at decode and small batches.
    for (const std::int64_t T : {1, 8}) layers.push_back({T, 128, 8, 2048, 768, true, true});
  }
  for (const LayerCase& c : layers) check_layer(results, rng, c);
  return results.exit_code();
}

}  // namespace
}  // namespace nibble::gpu_test

int main(int argc, char** argv) {
  return nibble::gpu_test::run_reporting_failures(nibble::gpu_test::run, argc, argv);
}
