// The layer kernels gpt-oss adds on the CUDA backend (kernels/layer/layer_ops.h) against FP64
// references of what the CPU backend computes (engine/backend/cpu/cpu_ops.h):
// rope_and_store_kv with YaRN's attention factor (cpu::apply_rope's scale: cosine and sine
// scaled) at head_dim 64 with YaRN-blended frequencies, into a BF16 cache; clamped_swiglu_
// interleaved (cpu::clamped_swiglu_value over gate_up's interleaved columns, alpha 1.702,
// limit 7, inputs large enough that both clamps bite); and add_bias_float (a router's FP32 scores
// plus its bias). Fresh random inputs (the seed is printed; NIBBLE_TEST_SEED reruns it), outputs
// poisoned first, within relative L2 1e-2 (METHOD.md's BF16 bound; add_bias_float: 1e-6, FP32).
// Exits 77 (ctest: skipped) without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "kernels/layer/layer_ops.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/gpu/bf16_checks.h"
#include "tests/gpu/gpu_check_support.h"
#include "tests/gpu/relative_error.h"

namespace nibble {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_bf16;
using nvfp4::bf16_to_float;
using nvfp4::float_to_bf16;

constexpr double kTolerance = 1e-2;
constexpr std::uint16_t kPoison = 0xFFFF;  // a BF16 NaN

void record(gpu_test::Results& results, const std::string& name,
            const std::vector<std::uint16_t>& got, const std::vector<double>& want) {
  gpu_test::record_relative_l2(results, name, got, want, kTolerance);
}

// A head after RoPE at `position` (rotate-half), both halves times `factor`.
std::vector<double> rotated(const std::uint16_t* x, const std::vector<double>& inv_freq,
                            int position, double factor) {
  const int half = int(inv_freq.size());
  std::vector<double> out(static_cast<std::size_t>(2 * half));
  for (int j = 0; j < half; ++j) {
    const double angle = position * inv_freq[std::size_t(j)];
    const double a = bf16_to_float(x[j]), b = bf16_to_float(x[j + half]);
    out[std::size_t(j)] = (a * std::cos(angle) - b * std::sin(angle)) * factor;
    out[std::size_t(j + half)] = (b * std::cos(angle) + a * std::sin(angle)) * factor;
  }
  return out;
}

// gpt-oss-20b's YaRN (factor 32 over 4,096 positions, beta 32 / 1, theta 150,000) at head_dim
// 64: each frequency blended between itself and itself / 32 by the ramp of transformers'
// _compute_yarn_parameters (cpu::rope_inverse_frequencies computes the same).
std::vector<double> yarn_inv_freq(int D) {
  constexpr double kTheta = 150000.0, kFactor = 32.0, kOriginal = 4096.0;
  const auto correction = [&](double rotations) {
    return D * std::log(kOriginal / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(kTheta));
  };
  const double low = std::max(std::floor(correction(32.0)), 0.0);
  const double high = std::min(std::ceil(correction(1.0)), double(D - 1));
  std::vector<double> inv(static_cast<std::size_t>(D / 2));
  for (int i = 0; i < D / 2; ++i) {
    const double f = std::pow(kTheta, -2.0 * i / D);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    inv[std::size_t(i)] = f / kFactor * ramp + f * (1.0 - ramp);
  }
  return inv;
}

void check_yarn_rope(gpu_test::Results& results, std::mt19937_64& rng, float factor) {
  constexpr int T = 6, Hq = 8, Hkv = 2, D = 64, kRows = 64;
  const std::string name = "YaRN RoPE attention factor " + std::to_string(factor);
  const auto q = random_bf16(rng, std::size_t(T) * Hq * D, 1.0f);
  const auto k = random_bf16(rng, std::size_t(T) * Hkv * D, 1.0f);
  const auto v = random_bf16(rng, std::size_t(T) * Hkv * D, 1.0f);
  const std::vector<double> inv_freq = yarn_inv_freq(D);
  std::vector<std::int32_t> positions(T);
  std::vector<std::int64_t> slots(T);
  std::uniform_int_distribution<int> pos(0, 131072), slot(0, 6);
  for (int t = 0; t < T; ++t) {
    positions[std::size_t(t)] = pos(rng);
    slots[std::size_t(t)] = 7 * t + slot(rng);  // distinct rows
  }
  DeviceArray<std::uint16_t> dq(q.size()), dk(k.size()), dv(v.size()), q_out(q.size()),
      k_cache(std::size_t(kRows) * Hkv * D), v_cache(k_cache.n);
  DeviceArray<double> dfreq(inv_freq.size());
  DeviceArray<std::int32_t> dpos(positions.size());
  DeviceArray<std::int64_t> dslots(slots.size());
  dq.upload(q);
  dk.upload(k);
  dv.upload(v);
  dfreq.upload(inv_freq);
  dpos.upload(positions);
  dslots.upload(slots);
  q_out.upload(std::vector<std::uint16_t>(q_out.n, kPoison));
  k_cache.upload(std::vector<std::uint16_t>(k_cache.n, kPoison));
  v_cache.upload(std::vector<std::uint16_t>(v_cache.n, kPoison));
  kernels::RopeStoreArgs a;
  a.q_in = dq.ptr;
  a.q_out = q_out.ptr;
  a.k = dk.ptr;
  a.v = dv.ptr;
  a.q_stride = std::int64_t(Hq) * D;
  a.kv_stride = std::int64_t(Hkv) * D;
  a.inv_freq = dfreq.ptr;
  a.attention_factor = factor;
  a.positions = dpos.ptr;
  a.slots = dslots.ptr;
  a.k_cache = k_cache.ptr;
  a.v_cache = v_cache.ptr;
  a.tokens = T;
  a.q_heads = Hq;
  a.kv_heads = Hkv;
  a.head_dim = D;
  NIBBLE_CUDA_CHECK(kernels::rope_and_store_kv(a, nullptr));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint16_t> got_q = q_out.download(), got_k, got_v;
  std::vector<double> want_q, want_k, want_v;
  const auto k_rows = k_cache.download(), v_rows = v_cache.download();
  for (int t = 0; t < T; ++t) {
    const int p = positions[std::size_t(t)];
    for (int h = 0; h < Hq; ++h) {
      const auto r = rotated(q.data() + (std::size_t(t) * Hq + h) * D, inv_freq, p, factor);
      want_q.insert(want_q.end(), r.begin(), r.end());
    }
    for (int h = 0; h < Hkv; ++h) {
      const std::size_t src = (std::size_t(t) * Hkv + h) * D;
      const auto r = rotated(k.data() + src, inv_freq, p, factor);
      want_k.insert(want_k.end(), r.begin(), r.end());
      const std::size_t row = (std::size_t(slots[std::size_t(t)]) * Hkv + h) * D;
      for (int i = 0; i < D; ++i) {
        got_k.push_back(k_rows[row + std::size_t(i)]);
        got_v.push_back(v_rows[row + std::size_t(i)]);
        want_v.push_back(bf16_to_float(v[src + std::size_t(i)]));  // values are not scaled
      }
    }
  }
  record(results, name + " q", got_q, want_q);
  record(results, name + " k stored", got_k, want_k);
  record(results, name + " v stored", got_v, want_v);
}

void check_clamped_swiglu(gpu_test::Results& results, std::mt19937_64& rng, int rows, int width) {
  constexpr double kAlpha = 1.702, kLimit = 7.0;
  // Sigma 5: a fair share of gates above the limit and of ups outside +-limit.
  const auto gate_up = random_bf16(rng, std::size_t(rows) * 2 * std::size_t(width), 5.0f);
  DeviceArray<std::uint16_t> dgu(gate_up.size()), act(std::size_t(rows) * std::size_t(width));
  dgu.upload(gate_up);
  act.upload(std::vector<std::uint16_t>(act.n, kPoison));
  NIBBLE_CUDA_CHECK(kernels::clamped_swiglu_interleaved(dgu.ptr, rows, width, float(kAlpha),
                                                        float(kLimit), act.ptr, nullptr));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> want;
  int clamped = 0;
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < width; ++i) {
      const std::size_t at = (std::size_t(r) * std::size_t(width) + std::size_t(i)) * 2;
      const double gate = bf16_to_float(gate_up[at]), up = bf16_to_float(gate_up[at + 1]);
      clamped += gate > kLimit || std::fabs(up) > kLimit;
      const double g = std::min(gate, kLimit), u = std::clamp(up, -kLimit, kLimit);
      want.push_back((u + 1.0) * g / (1.0 + std::exp(-kAlpha * g)));
    }
  record(results,
         "clamped_swiglu_interleaved " + std::to_string(rows) + " x " + std::to_string(width) +
             " (" + std::to_string(clamped) + " clamped)",
         act.download(), want);
}

void check_add_bias_float(gpu_test::Results& results, std::mt19937_64& rng) {
  constexpr int T = 11, E = 32;
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> y(std::size_t(T) * E), bias(E);
  for (auto& x : y) x = normal(rng);
  for (auto& x : bias) x = normal(rng);
  DeviceArray<float> dy(y.size()), db(bias.size());
  dy.upload(y);
  db.upload(bias);
  NIBBLE_CUDA_CHECK(kernels::add_bias_float(dy.ptr, db.ptr, T, E, nullptr));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = dy.download();
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - (double(y[i]) + bias[i % E])));
  results.record(worst < 1e-5, "add_bias_float", "largest difference " + std::to_string(worst));
}

int run(int, char**) {
  if (const std::string why = gpu_test::no_gpu_reason(); !why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return gpu_test::kSkipExitCode;
  }
  std::mt19937_64 rng(gpu_test::test_seed());
  gpu_test::Results results;
  // gpt-oss's attention factor, 0.1 ln(32) + 1, and 1 (every other model: unchanged bits).
  for (float factor : {1.3465736f, 1.0f}) check_yarn_rope(results, rng, factor);
  check_clamped_swiglu(results, rng, 1, 2880);
  check_clamped_swiglu(results, rng, 37, 96);
  check_add_bias_float(results, rng);
  return results.exit_code();
}

}  // namespace
}  // namespace nibble

int main(int argc, char** argv) {
  return nibble::gpu_test::run_reporting_failures(nibble::run, argc, argv);
}
