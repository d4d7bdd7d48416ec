// The layer kernels Qwen3-Next's gated attention and shared experts add (kernels/layer/
// layer_ops.h) against FP64 references of what the CPU backend computes (cpu::CpuForward):
// rope_and_store_kv with partial RoPE (the first quarter of each head rotated, rotate-half within
// it), q/k norms and q heads interleaved with their gates (q_head_stride 2 D), head_dim 64 and 256,
// into a BF16 cache; sigmoid_gate_heads over a gate strided inside q_proj's output; and
// add_sigmoid_scaled_rows. Fresh random inputs (the seed is printed; NIBBLE_TEST_SEED reruns it),
// outputs poisoned first, within relative L2 1e-2 (METHOD.md's BF16 bound). Exits 77 (ctest:
// skipped) without a GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
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

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

void record(gpu_test::Results& results, const std::string& name,
            const std::vector<std::uint16_t>& got, const std::vector<double>& want) {
  gpu_test::record_relative_l2(results, name, got, want, kTolerance);
}

// One token's head after the RMSNorm over it (rounded to BF16, as the kernel and the model's BF16
// code do) and RoPE on its first `rotary` dims at `position`.
std::vector<double> normed_and_rotated(const std::uint16_t* x, const std::vector<float>& norm,
                                       int D, int rotary, int position, double theta) {
  double sum = 0;
  for (int i = 0; i < D; ++i) sum += double(bf16_to_float(x[i])) * bf16_to_float(x[i]);
  const double scale = 1.0 / std::sqrt(sum / D + 1e-6);
  std::vector<double> h(static_cast<std::size_t>(D)), out;
  for (int i = 0; i < D; ++i)
    h[std::size_t(i)] = bf16_to_float(float_to_bf16(float(bf16_to_float(x[i]) * scale * norm[i])));
  out = h;
  const int half = rotary / 2;
  for (int j = 0; j < half; ++j) {
    const double angle = position * std::pow(theta, -2.0 * j / rotary);
    const double a = h[std::size_t(j)], b = h[std::size_t(j + half)];
    out[std::size_t(j)] = a * std::cos(angle) - b * std::sin(angle);
    out[std::size_t(j + half)] = b * std::cos(angle) + a * std::sin(angle);
  }
  return out;
}

void check_partial_rope(gpu_test::Results& results, std::mt19937_64& rng, int D) {
  constexpr int T = 5, Hq = 8, Hkv = 2, kRows = 64;
  constexpr double kTheta = 10000000.0;
  const int rotary = D / 4;
  const std::string name = "partial RoPE D" + std::to_string(D);
  // q_proj's output: per head the query (D) then its gate (D).
  const auto q = random_bf16(rng, std::size_t(T) * Hq * 2 * D, 1.0f);
  const auto k = random_bf16(rng, std::size_t(T) * Hkv * D, 1.0f);
  const auto v = random_bf16(rng, std::size_t(T) * Hkv * D, 1.0f);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> q_norm(static_cast<std::size_t>(D)), k_norm(q_norm.size());
  for (auto& x : q_norm) x = 1.0f + u(rng);
  for (auto& x : k_norm) x = 1.0f + u(rng);
  std::vector<double> inv_freq(static_cast<std::size_t>(rotary / 2));
  for (int j = 0; j < rotary / 2; ++j)
    inv_freq[std::size_t(j)] = std::pow(kTheta, -2.0 * j / rotary);
  std::vector<std::int32_t> positions(T);
  std::vector<std::int64_t> slots(T);
  std::uniform_int_distribution<int> pos(0, 100000), slot(0, kRows - 1);
  for (int t = 0; t < T; ++t) {
    positions[std::size_t(t)] = pos(rng);
    slots[std::size_t(t)] = 7 * t + slot(rng) % 7;  // distinct rows
  }
  DeviceArray<std::uint16_t> dq(q.size()), dk(k.size()), dv(v.size()),
      q_out(std::size_t(T) * Hq * D), k_cache(std::size_t(kRows) * Hkv * D), v_cache(k_cache.n);
  DeviceArray<float> dqn(q_norm.size()), dkn(k_norm.size());
  DeviceArray<double> dfreq(inv_freq.size());
  DeviceArray<std::int32_t> dpos(positions.size());
  DeviceArray<std::int64_t> dslots(slots.size());
  dq.upload(q);
  dk.upload(k);
  dv.upload(v);
  dqn.upload(q_norm);
  dkn.upload(k_norm);
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
  a.q_stride = std::int64_t(Hq) * 2 * D;
  a.kv_stride = std::int64_t(Hkv) * D;
  a.q_head_stride = 2 * D;
  a.rotary_dim = rotary;
  a.q_norm = dqn.ptr;
  a.k_norm = dkn.ptr;
  a.inv_freq = dfreq.ptr;
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
    for (int h = 0; h < Hq; ++h) {
      const auto r = normed_and_rotated(q.data() + (std::size_t(t) * Hq + h) * 2 * D, q_norm, D,
                                        rotary, positions[std::size_t(t)], kTheta);
      want_q.insert(want_q.end(), r.begin(), r.end());
    }
    for (int h = 0; h < Hkv; ++h) {
      const std::size_t src = (std::size_t(t) * Hkv + h) * D;
      const auto r =
          normed_and_rotated(k.data() + src, k_norm, D, rotary, positions[std::size_t(t)], kTheta);
      want_k.insert(want_k.end(), r.begin(), r.end());
      const std::size_t row = (std::size_t(slots[std::size_t(t)]) * Hkv + h) * D;
      for (int i = 0; i < D; ++i) {
        got_k.push_back(k_rows[row + std::size_t(i)]);
        got_v.push_back(v_rows[row + std::size_t(i)]);
        want_v.push_back(bf16_to_float(v[src + std::size_t(i)]));
      }
    }
  }
  record(results, name + " q", got_q, want_q);
  record(results, name + " k stored", got_k, want_k);
  record(results, name + " v stored", got_v, want_v);
}

void check_sigmoid_gate_heads(gpu_test::Results& results, std::mt19937_64& rng) {
  constexpr int T = 7, H = 4, D = 96;
  const auto y = random_bf16(rng, std::size_t(T) * H * D, 1.0f);
  const std::int64_t stride = std::int64_t(H) * 2 * D + 64;  // each row's q and gates, + k, v
  const auto qg = random_bf16(rng, std::size_t(T * stride), 2.0f);
  DeviceArray<std::uint16_t> dy(y.size()), dg(qg.size());
  dy.upload(y);
  dg.upload(qg);
  NIBBLE_CUDA_CHECK(
      kernels::sigmoid_gate_heads(dy.ptr, dg.ptr + D, T, H, D, stride, 2 * D, nullptr));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> want;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d)
        want.push_back(bf16_to_float(y[(std::size_t(t) * H + h) * D + std::size_t(d)]) *
                       sigmoid(bf16_to_float(qg[std::size_t(t * stride + h * 2 * D + D + d)])));
  record(results, "sigmoid_gate_heads", dy.download(), want);
}

void check_add_sigmoid_scaled_rows(gpu_test::Results& results, std::mt19937_64& rng) {
  constexpr int T = 9, H = 320;
  const auto x = random_bf16(rng, std::size_t(T) * H, 1.0f);
  const auto y = random_bf16(rng, std::size_t(T) * H, 1.0f);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> scale(T);
  for (auto& s : scale) s = normal(rng);
  DeviceArray<std::uint16_t> dx(x.size()), dy(y.size());
  DeviceArray<float> ds(scale.size());
  dx.upload(x);
  dy.upload(y);
  ds.upload(scale);
  NIBBLE_CUDA_CHECK(kernels::add_sigmoid_scaled_rows(dx.ptr, dy.ptr, ds.ptr, T, H, nullptr));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> want;
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < H; ++d) {
      const std::size_t i = std::size_t(t) * H + std::size_t(d);
      want.push_back(bf16_to_float(x[i]) + sigmoid(scale[std::size_t(t)]) * bf16_to_float(y[i]));
    }
  record(results, "add_sigmoid_scaled_rows", dx.download(), want);
}

int run(int, char**) {
  if (const std::string why = gpu_test::no_gpu_reason(); !why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return gpu_test::kSkipExitCode;
  }
  std::mt19937_64 rng(gpu_test::test_seed());
  gpu_test::Results results;
  for (int D : {64, 256}) check_partial_rope(results, rng, D);
  check_sigmoid_gate_heads(results, rng);
  check_add_sigmoid_scaled_rows(results, rng);
  // Partial RoPE refuses what it cannot run: an odd rotary dimension.
  kernels::RopeStoreArgs odd;
  odd.tokens = 1;
  odd.head_dim = 64;
  odd.rotary_dim = 15;
  results.record(kernels::rope_and_store_kv(odd, nullptr) == cudaErrorInvalidValue,
                 "partial RoPE refuses an odd rotary dimension", "");
  return results.exit_code();
}

}  // namespace
}  // namespace nibble

int main(int argc, char** argv) {
  return nibble::gpu_test::run_reporting_failures(nibble::run, argc, argv);
}
