#include "kernels/linear_attention/gated_deltanet_ref.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/linear_attention/causal_conv1d_ref.h"
#include "kernels/linear_attention/gated_norm_ref.h"

namespace nibble::kernels {

void gated_deltanet_mix_ref(const GatedDeltaNetShape& s, std::int64_t tokens,
                            std::span<const float> qkvz, std::span<const float> ba,
                            const GatedDeltaNetParams& p, std::span<float> conv_state,
                            std::span<float> state, std::span<float> out, bool chunked) {
  const GatedDeltaShape& h = s.heads;
  if (h.k_heads < 1 || h.v_heads % h.k_heads != 0 || s.conv_kernel < 1 || tokens < 0 ||
      qkvz.size() != std::size_t(tokens) * std::size_t(s.qkvz_width()) ||
      ba.size() != std::size_t(tokens) * std::size_t(s.ba_width()) ||
      out.size() != std::size_t(tokens) * std::size_t(s.value_dim()) ||
      p.A_log.size() != std::size_t(h.v_heads) || p.dt_bias.size() != std::size_t(h.v_heads) ||
      p.norm_weight.size() != std::size_t(h.v_dim))
    throw std::invalid_argument("gated deltanet: array sizes do not match the shape");
  const auto T = std::size_t(tokens), G = std::size_t(s.group());
  const auto Dk = std::size_t(h.k_dim), Dv = std::size_t(h.v_dim);
  const auto conv_dim = std::size_t(s.conv_dim()), key_dim = std::size_t(s.key_dim());
  const auto value_dim = std::size_t(s.value_dim()), per_kh = 2 * Dk + 2 * G * Dv;
  // The grouped projections to the conv's channel order (q, k, v), z and the gate inputs.
  std::vector<float> mixed(T * conv_dim), z(T * value_dim), a(T * std::size_t(h.v_heads)),
      b(a.size());
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t kh = 0; kh < std::size_t(h.k_heads); ++kh) {
      const float* src = qkvz.data() + t * std::size_t(s.qkvz_width()) + kh * per_kh;
      float* row = mixed.data() + t * conv_dim;
      for (std::size_t i = 0; i < Dk; ++i) {
        row[kh * Dk + i] = src[i];
        row[key_dim + kh * Dk + i] = src[Dk + i];
      }
      for (std::size_t i = 0; i < G * Dv; ++i) {
        row[2 * key_dim + kh * G * Dv + i] = src[2 * Dk + i];
        z[t * value_dim + kh * G * Dv + i] = src[2 * Dk + G * Dv + i];
      }
      const float* gates = ba.data() + t * std::size_t(s.ba_width()) + kh * 2 * G;
      for (std::size_t i = 0; i < G; ++i) {
        b[t * std::size_t(h.v_heads) + kh * G + i] = gates[i];
        a[t * std::size_t(h.v_heads) + kh * G + i] = gates[G + i];
      }
    }
  }
  std::vector<float> conv_out(mixed.size());
  causal_conv1d_ref(tokens, int(conv_dim), s.conv_kernel, mixed, p.conv_weight, conv_state,
                    conv_out);
  std::vector<float> q(T * key_dim), k(T * key_dim), v(T * value_dim), g(a.size()), beta(a.size());
  for (std::size_t t = 0; t < T; ++t) {
    const float* row = conv_out.data() + t * conv_dim;
    std::copy(row, row + key_dim, q.data() + t * key_dim);
    std::copy(row + key_dim, row + 2 * key_dim, k.data() + t * key_dim);
    std::copy(row + 2 * key_dim, row + conv_dim, v.data() + t * value_dim);
  }
  gated_delta_gates_ref(tokens, h.v_heads, a, b, p.A_log, p.dt_bias, g, beta);
  std::vector<float> core(T * value_dim);
  const GatedDeltaInputs in{q, k, v, g, beta};
  if (chunked)
    gated_delta_chunked_ref(h, tokens, in, state, core);
  else
    gated_delta_recurrent_ref(h, tokens, in, state, core);
  gated_rms_norm_ref(tokens * h.v_heads, h.v_dim, core, z, p.norm_weight, p.eps, out);
}

}  // namespace nibble::kernels
