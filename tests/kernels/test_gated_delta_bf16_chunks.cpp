// The chunked device kernel's numerics (kernels/linear_attention/gated_deltanet_chunked.h) on the
// CPU: the WY form with BF16 wherever the kernel rounds (q, k, v in the workspace; T diag(beta)
// and T diag(beta e^G) as mma operands; W and U stored; the state's BF16 copy for W S and Q S;
// U', e^(G_last - G) U' and the masked Q K^T as operands; the output before the norm), FP32
// elsewhere (G, the inverse, accumulators, the state), against the recurrent FP64 reference: the
// precision budget the GPU test's bounds (1e-2) assume; and the same steps without rounding
// (within 1e-4: FP32 rounding through up to 257 steps of decays reaches ~2e-5), the kernel's
// arrangement of the algebra (which factor carries e^G, the padding of a last partial chunk).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/linear_attention/gated_delta_ref.h"
#include "kernels/nvfp4/bf16.h"

#include "tests/kernels/relative_l2.h"

namespace nibble::kernels {
namespace {

// Where the kernel rounds to BF16; off, the same steps in FP32 (the algebra alone).
bool g_round = true;
float bf(float x) {
  return g_round ? nvfp4::bf16_to_float(nvfp4::float_to_bf16(x)) : x;
}

using testing::relative_l2;

// One value head: q, k [T][K] normalised (q scaled), v [T][V], g, beta [T]; S [K][V] in and out;
// o [T][V]. The kernel's steps, chunk by chunk.
void kernel_model(int K, int V, int T, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<float>& g,
                  const std::vector<float>& beta, std::vector<float>& S, std::vector<float>& o) {
  constexpr int C = 64;
  auto at = [](int i, int j, int cols) { return std::size_t(i) * std::size_t(cols) + j; };
  for (int c0 = 0; c0 < T; c0 += C) {
    const int n = std::min(C, T - c0);
    std::vector<float> G(C), b(C, 0.0f);
    float run = 0.0f;
    for (int i = 0; i < C; ++i) {
      if (i < n) {
        run += g[std::size_t(c0 + i)];
        b[std::size_t(i)] = beta[std::size_t(c0 + i)];
      }
      G[std::size_t(i)] = run;  // padding: G_last, beta 0
    }
    auto qk = [&](const std::vector<float>& x, int i, int j) {  // BF16 operands, FP32 sums
      if (i >= n || j >= n) return 0.0f;
      float sum = 0.0f;
      for (int d = 0; d < K; ++d) sum += bf(x[at(c0 + i, d, K)]) * bf(k[at(c0 + j, d, K)]);
      return sum;
    };
    // wy: A, T = (I + A)^-1, Tw and Tu in BF16, W and U stored in BF16.
    std::vector<float> A(C * C, 0.0f), Tm(C * C, 0.0f);
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < i; ++j)
        A[at(i, j, C)] =
            b[std::size_t(i)] * std::exp(G[std::size_t(i)] - G[std::size_t(j)]) * qk(k, i, j);
    for (int c = 0; c < C; ++c) {
      Tm[at(c, c, C)] = 1.0f;
      for (int i = c + 1; i < C; ++i) {
        float sum = 0.0f;
        for (int j = c; j < i; ++j) sum += A[at(i, j, C)] * Tm[at(j, c, C)];
        Tm[at(i, c, C)] = -sum;
      }
    }
    std::vector<float> W(C * K, 0.0f), U(C * V, 0.0f);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j <= i; ++j) {
        const float tu = bf(Tm[at(i, j, C)] * b[std::size_t(j)]);
        const float tw = bf(Tm[at(i, j, C)] * b[std::size_t(j)] * std::exp(G[std::size_t(j)]));
        for (int d = 0; d < K; ++d) W[at(i, d, K)] += tw * bf(k[at(c0 + j, d, K)]);
        for (int e = 0; e < V; ++e) U[at(i, e, V)] += tu * bf(v[at(c0 + j, e, V)]);
      }
    }
    for (auto& x : W) x = bf(x);
    for (auto& x : U) x = bf(x);
    // state: U' = U - W S, O = e^G Q S + P U', S <- e^G_last S + K^T (e^(G_last - G) U').
    const float G_last = G[C - 1];
    std::vector<float> up(C * V, 0.0f), ud(C * V, 0.0f);
    for (int i = 0; i < n; ++i)
      for (int e = 0; e < V; ++e) {
        float ws = 0.0f, qs = 0.0f;
        for (int d = 0; d < K; ++d) {
          const float s = bf(S[at(d, e, V)]);
          ws += W[at(i, d, K)] * s;
          qs += bf(q[at(c0 + i, d, K)]) * s;
        }
        const float u = U[at(i, e, V)] - ws;
        up[at(i, e, V)] = bf(u);
        ud[at(i, e, V)] = bf(std::exp(G_last - G[std::size_t(i)]) * u);
        o[at(c0 + i, e, V)] = std::exp(G[std::size_t(i)]) * qs;
      }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j <= i; ++j) {
        const float p = bf(std::exp(G[std::size_t(i)] - G[std::size_t(j)]) * qk(q, i, j));
        for (int e = 0; e < V; ++e) o[at(c0 + i, e, V)] += p * up[at(j, e, V)];
      }
    for (int i = 0; i < n; ++i)
      for (int e = 0; e < V; ++e) o[at(c0 + i, e, V)] = bf(o[at(c0 + i, e, V)]);
    for (int d = 0; d < K; ++d)
      for (int e = 0; e < V; ++e) {
        float s = std::exp(G_last) * S[at(d, e, V)];
        for (int j = 0; j < n; ++j) s += bf(k[at(c0 + j, d, K)]) * ud[at(j, e, V)];
        S[at(d, e, V)] = s;
      }
  }
}

// q and k rows L2-normalised as the kernels do (q also by 1 / sqrt(K)).
void normalise(std::vector<float>& x, int K, bool query) {
  for (std::size_t r = 0; r < x.size() / std::size_t(K); ++r) {
    double sum = 0.0;
    for (int d = 0; d < K; ++d) sum += double(x[r * K + d]) * x[r * K + d];
    const double scale = 1.0 / std::sqrt(sum + 1e-6) / (query ? std::sqrt(double(K)) : 1.0);
    for (int d = 0; d < K; ++d) x[r * K + d] = float(x[r * K + d] * scale);
  }
}

TEST(GatedDeltaBf16Chunks, WithinTheGpuTestsBounds) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.01f, 16.0f);
  for (const int K : {64, 128}) {
    for (const int T : {1, 64, 130, 257}) {
      const int V = 128;
      // The GPU test's inputs: q, k, v after a conv + SiLU, gates from N(0, 2) projections.
      auto silu_normal = [&](std::size_t n) {
        std::vector<float> x(n);
        for (auto& e : x) {
          const float a = 1.4f * normal(rng);
          e = bf(a / (1.0f + std::exp(-a)));
        }
        return x;
      };
      std::vector<float> q = silu_normal(std::size_t(T * K)), k = silu_normal(q.size()),
                         v = silu_normal(std::size_t(T * V));
      const auto n = static_cast<std::size_t>(T);
      std::vector<float> a(n), bb(n), g(n), beta(n);
      for (auto& x : a) x = 2.0f * normal(rng);
      for (auto& x : bb) x = 2.0f * normal(rng);
      const std::vector<float> A_log{std::log(uniform(rng))}, dt_bias{1.0f};
      gated_delta_gates_ref(T, 1, a, bb, A_log, dt_bias, g, beta);
      std::vector<float> state(std::size_t(K * V));
      for (auto& x : state) x = 0.1f * normal(rng);

      const GatedDeltaShape shape{1, 1, K, V};
      std::vector<float> want_state = state, want(std::size_t(T * V));
      gated_delta_recurrent_ref(shape, T, {q, k, v, g, beta}, want_state, want);
      normalise(q, K, true);
      normalise(k, K, false);
      // FP32 throughout: the kernel's arrangement of the algebra is the recurrence.
      g_round = false;
      std::vector<float> exact_state = state, exact(want.size());
      kernel_model(K, V, T, q, k, v, g, beta, exact_state, exact);
      EXPECT_LT(relative_l2(want, exact), 1e-4) << "k_dim " << K << ", T " << T;
      EXPECT_LT(relative_l2(want_state, exact_state), 1e-4) << "k_dim " << K << ", T " << T;
      g_round = true;
      std::vector<float> got_state = state, got(want.size());
      kernel_model(K, V, T, q, k, v, g, beta, got_state, got);
      const double out_err = relative_l2(want, got), state_err = relative_l2(want_state, got_state);
      // Typically 2e-3 .. 4e-3 (one token's 128 outputs up to ~8e-3): q, k, U', the state's
      // update and the output each rounded once to BF16.
      EXPECT_LT(out_err, 1e-2) << "k_dim " << K << ", T " << T;
      EXPECT_LT(state_err, 1e-2) << "k_dim " << K << ", T " << T;
      std::printf("k_dim %d, T %3d, A_log %.2f: out rel %.2e, state rel %.2e\n", K, T,
                  double(A_log[0]), out_err, state_err);
    }
  }
}

}  // namespace
}  // namespace nibble::kernels
