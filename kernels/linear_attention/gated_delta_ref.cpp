#include "kernels/linear_attention/gated_delta_ref.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace nibble::kernels {
namespace {

constexpr double kL2NormEps = 1e-6;  // the reference's l2norm epsilon

void check_shape(const GatedDeltaShape& s, std::int64_t tokens, const GatedDeltaInputs& in,
                 std::span<float> state, std::span<float> out) {
  if (s.k_heads < 1 || s.v_heads < 1 || s.v_heads % s.k_heads != 0 || s.k_dim < 1 || s.v_dim < 1 ||
      tokens < 0)
    throw std::invalid_argument("gated delta rule: bad shape");
  const auto qk = std::size_t(tokens * s.k_heads * s.k_dim);
  const auto v = std::size_t(tokens * s.v_heads * s.v_dim);
  const auto gates = std::size_t(tokens * s.v_heads);
  if (in.q.size() != qk || in.k.size() != qk || in.v.size() != v || in.g.size() != gates ||
      in.beta.size() != gates || state.size() != std::size_t(s.state_floats()) || out.size() != v)
    throw std::invalid_argument("gated delta rule: array sizes do not match the shape");
}

// Token t's q and k rows of key head kh, L2-normalised (q also scaled by 1 / sqrt(k_dim)).
void normed_qk(const GatedDeltaShape& s, const GatedDeltaInputs& in, std::int64_t t, int kh,
               std::vector<double>& q, std::vector<double>& k) {
  const std::size_t at = std::size_t((t * s.k_heads + kh) * s.k_dim);
  double qq = 0.0, kk = 0.0;
  for (int i = 0; i < s.k_dim; ++i) {
    qq += double(in.q[at + std::size_t(i)]) * in.q[at + std::size_t(i)];
    kk += double(in.k[at + std::size_t(i)]) * in.k[at + std::size_t(i)];
  }
  const double qs = 1.0 / std::sqrt(qq + kL2NormEps) / std::sqrt(double(s.k_dim));
  const double ks = 1.0 / std::sqrt(kk + kL2NormEps);
  for (int i = 0; i < s.k_dim; ++i) {
    q[std::size_t(i)] = in.q[at + std::size_t(i)] * qs;
    k[std::size_t(i)] = in.k[at + std::size_t(i)] * ks;
  }
}

}  // namespace

void gated_delta_recurrent_ref(const GatedDeltaShape& s, std::int64_t tokens,
                               const GatedDeltaInputs& in, std::span<float> state,
                               std::span<float> out) {
  check_shape(s, tokens, in, state, out);
  const int group = s.v_heads / s.k_heads;
  const auto K = std::size_t(s.k_dim), V = std::size_t(s.v_dim);
  std::vector<double> S(K * V), q(K), k(K), u(V);
  for (int h = 0; h < s.v_heads; ++h) {
    float* const st = state.data() + std::size_t(h) * K * V;
    for (std::size_t i = 0; i < K * V; ++i) S[i] = st[i];
    for (std::int64_t t = 0; t < tokens; ++t) {
      normed_qk(s, in, t, h / group, q, k);
      const double decay = std::exp(double(in.g[std::size_t(t * s.v_heads + h)]));
      const double beta = in.beta[std::size_t(t * s.v_heads + h)];
      const float* const v = in.v.data() + std::size_t((t * s.v_heads + h) * s.v_dim);
      for (auto& x : S) x *= decay;
      for (std::size_t j = 0; j < V; ++j) {
        double kv = 0.0;
        for (std::size_t i = 0; i < K; ++i) kv += S[i * V + j] * k[i];
        u[j] = beta * (v[j] - kv);
      }
      for (std::size_t i = 0; i < K; ++i)
        for (std::size_t j = 0; j < V; ++j) S[i * V + j] += k[i] * u[j];
      float* const o = out.data() + std::size_t((t * s.v_heads + h) * s.v_dim);
      for (std::size_t j = 0; j < V; ++j) {
        double sum = 0.0;
        for (std::size_t i = 0; i < K; ++i) sum += S[i * V + j] * q[i];
        o[j] = float(sum);
      }
    }
    for (std::size_t i = 0; i < K * V; ++i) st[i] = float(S[i]);
  }
}

// Within a chunk of C tokens starting from state S0, with G_i the cumulative log decay inside the
// chunk and D_i = exp(G_i):
//   S_i = D_i S0 + sum_{j <= i} exp(G_i - G_j) k_j u_j^T
//   u_i = beta_i (v_i - D_i S0^T k_i - sum_{j < i} exp(G_i - G_j) (k_i . k_j) u_j)
// so (I + L) U = diag(beta) V - diag(beta D) K S0 with L[i][j] = beta_i exp(G_i - G_j) (k_i . k_j)
// for j < i: forward substitution gives the u's; then
//   o_i = D_i S0^T q_i + sum_{j <= i} exp(G_i - G_j) (q_i . k_j) u_j
//   S0 <- D_{C-1} S0 + sum_j exp(G_{C-1} - G_j) k_j u_j^T.
void gated_delta_chunked_ref(const GatedDeltaShape& s, std::int64_t tokens,
                             const GatedDeltaInputs& in, std::span<float> state,
                             std::span<float> out, int chunk_size) {
  check_shape(s, tokens, in, state, out);
  if (chunk_size < 1) throw std::invalid_argument("gated delta rule: chunk_size < 1");
  const int group = s.v_heads / s.k_heads;
  const auto K = std::size_t(s.k_dim), V = std::size_t(s.v_dim), C = std::size_t(chunk_size);
  std::vector<double> S(K * V), q(C * K), k(C * K), u(C * V), G(C), beta(C);
  for (int h = 0; h < s.v_heads; ++h) {
    float* const st = state.data() + std::size_t(h) * K * V;
    for (std::size_t i = 0; i < K * V; ++i) S[i] = st[i];
    for (std::int64_t c0 = 0; c0 < tokens; c0 += chunk_size) {
      const auto n = std::size_t(std::min<std::int64_t>(chunk_size, tokens - c0));
      double cumulative = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t t = c0 + std::int64_t(i);
        std::vector<double> qi(K), ki(K);
        normed_qk(s, in, t, h / group, qi, ki);
        for (std::size_t d = 0; d < K; ++d) {
          q[i * K + d] = qi[d];
          k[i * K + d] = ki[d];
        }
        cumulative += in.g[std::size_t(t * s.v_heads + h)];
        G[i] = cumulative;
        beta[i] = in.beta[std::size_t(t * s.v_heads + h)];
      }
      auto dot = [&](const std::vector<double>& a, std::size_t i, std::size_t j) {
        double sum = 0.0;
        for (std::size_t d = 0; d < K; ++d) sum += a[i * K + d] * k[j * K + d];
        return sum;
      };
      // u_i by forward substitution (rows in order: row i needs the u_j of j < i).
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t t = c0 + std::int64_t(i);
        const float* const v = in.v.data() + std::size_t((t * s.v_heads + h) * s.v_dim);
        const double Di = std::exp(G[i]);
        for (std::size_t j = 0; j < V; ++j) {
          double s0k = 0.0;
          for (std::size_t d = 0; d < K; ++d) s0k += S[d * V + j] * k[i * K + d];
          u[i * V + j] = v[j] - Di * s0k;
        }
        for (std::size_t j = 0; j < i; ++j) {
          const double l = std::exp(G[i] - G[j]) * dot(k, i, j);
          for (std::size_t e = 0; e < V; ++e) u[i * V + e] -= l * u[j * V + e];
        }
        for (std::size_t e = 0; e < V; ++e) u[i * V + e] *= beta[i];
      }
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t t = c0 + std::int64_t(i);
        const double Di = std::exp(G[i]);
        float* const o = out.data() + std::size_t((t * s.v_heads + h) * s.v_dim);
        std::vector<double> acc(V, 0.0);
        for (std::size_t d = 0; d < K; ++d)
          for (std::size_t e = 0; e < V; ++e) acc[e] += Di * S[d * V + e] * q[i * K + d];
        for (std::size_t j = 0; j <= i; ++j) {
          const double w = std::exp(G[i] - G[j]) * dot(q, i, j);
          for (std::size_t e = 0; e < V; ++e) acc[e] += w * u[j * V + e];
        }
        for (std::size_t e = 0; e < V; ++e) o[e] = float(acc[e]);
      }
      const double last = G[n - 1];
      for (auto& x : S) x *= std::exp(last);
      for (std::size_t j = 0; j < n; ++j) {
        const double w = std::exp(last - G[j]);
        for (std::size_t d = 0; d < K; ++d)
          for (std::size_t e = 0; e < V; ++e) S[d * V + e] += w * k[j * K + d] * u[j * V + e];
      }
    }
    for (std::size_t i = 0; i < K * V; ++i) st[i] = float(S[i]);
  }
}

void gated_delta_gates_ref(std::int64_t tokens, int v_heads, std::span<const float> a,
                           std::span<const float> b, std::span<const float> A_log,
                           std::span<const float> dt_bias, std::span<float> g,
                           std::span<float> beta) {
  const auto n = std::size_t(tokens * v_heads);
  if (tokens < 0 || v_heads < 1 || a.size() != n || b.size() != n || g.size() != n ||
      beta.size() != n || A_log.size() != std::size_t(v_heads) ||
      dt_bias.size() != std::size_t(v_heads))
    throw std::invalid_argument("gated delta gates: array sizes do not match");
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t h = i % std::size_t(v_heads);
    const double x = double(a[i]) + dt_bias[h];
    const double softplus = x > 20.0 ? x : std::log1p(std::exp(x));  // torch's threshold
    g[i] = float(-std::exp(double(A_log[h])) * softplus);
    beta[i] = float(1.0 / (1.0 + std::exp(-double(b[i]))));
  }
}

}  // namespace nibble::kernels
