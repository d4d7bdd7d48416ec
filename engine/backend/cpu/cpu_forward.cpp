#include "engine/backend/cpu/cpu_forward.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/moe_routing.h"
#include "kernels/linear_attention/gated_deltanet_ref.h"

namespace nibble::backend::cpu {

using model::LayerWeights;

CpuForward::CpuForward(const model::ModelWeights& weights, std::span<const double> inv_freq,
                       CpuKvCache& cache, std::span<const BatchItem> items, ThreadPool& pool)
    : w_(weights), inv_freq_(inv_freq), cache_(cache), items_(items), pool_(pool) {
  for (const BatchItem& item : items)
    for (std::size_t j = 0; j < item.tokens.size(); ++j)
      rows_.push_back({&item, item.start + int(j)});
}

void CpuForward::embed() {
  const std::int64_t H = w_.config.hidden_size;
  x_.resize(rows_.size() * std::size_t(H));
  std::int64_t t = 0;
  for (const BatchItem& item : items_)
    for (auto token : item.tokens)
      std::copy_n(w_.embed.begin() + std::int64_t(token) * H, H, x_.begin() + H * t++);
}

// An MTP module's input: each row's embedding and the hidden state its item brings, each
// normed, side by side through fc (the embedding first, as vLLM's concatenation).
void CpuForward::embed_with_hidden(model::NormKind norm) {
  const std::int64_t H = w_.config.hidden_size, T = std::int64_t(rows_.size());
  const model::MtpWeights& mtp = *w_.mtp;
  std::vector<float> e(std::size_t(T * H)), h(std::size_t(T * H)), both(std::size_t(T * 2 * H));
  std::int64_t t = 0;
  for (const BatchItem& item : items_) {
    std::copy(item.hidden_in.begin(), item.hidden_in.end(), h.begin() + t * H);
    for (auto token : item.tokens)
      std::copy_n(w_.embed.begin() + std::int64_t(token) * H, H, e.begin() + H * t++);
  }
  norm_rows(norm, e, H, mtp.embedding_norm);
  norm_rows(norm, h, H, mtp.hidden_norm);
  for (std::int64_t r = 0; r < T; ++r) {
    std::copy_n(e.begin() + r * H, H, both.begin() + r * 2 * H);
    std::copy_n(h.begin() + r * H, H, both.begin() + r * 2 * H + H);
  }
  x_.assign(std::size_t(T * H), 0.0f);
  linear_forward(mtp.fc, both, T, x_, pool_);
}

// An EAGLE-3 head's input: each item's hidden states start the residual stream, through fc
// where they are the target's (3 * target H wide; batch_checks.h), as they are where they are the
// head's own (H wide). The embeddings wait for the first layer's attention.
void CpuForward::eagle3_input() {
  const std::int64_t H = w_.config.hidden_size, T = std::int64_t(rows_.size());
  const model::Linear& fc = w_.eagle3->fc;
  x_.assign(std::size_t(T * H), 0.0f);
  embedding_.resize(std::size_t(T * H));
  std::int64_t t = 0;
  for (const BatchItem& item : items_) {
    const std::int64_t n = std::int64_t(item.tokens.size());
    for (std::int64_t j = 0; j < n; ++j)
      std::copy_n(w_.embed.begin() + std::int64_t(item.tokens[std::size_t(j)]) * H, H,
                  embedding_.begin() + (t + j) * H);
    const std::span<float> rows = std::span(x_).subspan(std::size_t(t * H), std::size_t(n * H));
    if (std::int64_t(item.hidden_in.size()) == n * H)
      std::ranges::copy(item.hidden_in, rows.begin());
    else
      linear_forward(fc, item.hidden_in, n, rows, pool_);
    t += n;
  }
}

void CpuForward::keep_hidden_state(int index) {
  const std::int64_t H = w_.config.hidden_size, T = std::int64_t(rows_.size());
  const std::int64_t width = w_.config.hidden_state_width();
  kept_.resize(std::size_t(T * width));
  for (std::int64_t t = 0; t < T; ++t)
    std::copy_n(x_.begin() + t * H, H, kept_.begin() + t * width + index * H);
}

void CpuForward::norm_rows(model::NormKind norm, std::span<float> x, std::int64_t dim,
                           std::span<const float> weight) const {
  switch (norm) {
    case model::NormKind::kRms:
      rms_norm(x, dim, weight, w_.config.rms_norm_eps);
      break;
    case model::NormKind::kRmsZeroCentred:
      rms_norm(x, dim, weight, w_.config.rms_norm_eps, 1.0f);
      break;
  }
}

std::vector<float> CpuForward::normed(model::NormKind norm, std::span<const float> weight) const {
  std::vector<float> h = x_;
  norm_rows(norm, h, w_.config.hidden_size, weight);
  return h;
}

void CpuForward::attention(int l, model::NormKind norm, const model::AttentionSpec& spec) {
  const auto& c = w_.config;
  const LayerWeights& w = w_.layers[std::size_t(l)];
  const std::int64_t T = std::int64_t(rows_.size());
  const std::int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  std::vector<float> h = normed(norm, w.input_norm);
  if (spec.reads_embedding) {
    // EAGLE-3: [input_layernorm(embedding), hidden_norm(x)] side by side, 2H a row.
    std::vector<float> e = embedding_, hidden = x_;
    norm_rows(norm, e, H, w.input_norm);
    norm_rows(norm, hidden, H, w.hidden_norm);
    h.assign(std::size_t(T * 2 * H), 0.0f);
    for (std::int64_t r = 0; r < T; ++r) {
      std::copy_n(e.begin() + r * H, H, h.begin() + r * 2 * H);
      std::copy_n(hidden.begin() + r * H, H, h.begin() + r * 2 * H + H);
    }
    if (spec.norm_before_residual) x_ = std::move(hidden);
  }
  std::vector<float> q(std::size_t(T * Hq * D)), k(std::size_t(T * Hkv * D)),
      v(std::size_t(T * Hkv * D)), gate;
  // The projections carry their biases when the layer has them (spec.qkv_bias: the loader
  // checked they are there).
  if (spec.output_gate) {
    // q_proj's rows per head: the query's D, then the gate's D.
    std::vector<float> qg(std::size_t(T * Hq * 2 * D));
    linear_forward(w.q, h, T, qg, pool_);
    gate.resize(q.size());
    for (std::int64_t i = 0; i < T * Hq; ++i) {
      std::copy_n(qg.begin() + i * 2 * D, D, q.begin() + i * D);
      std::copy_n(qg.begin() + i * 2 * D + D, D, gate.begin() + i * D);
    }
  } else {
    linear_forward(w.q, h, T, q, pool_);
  }
  linear_forward(w.k, h, T, k, pool_);
  linear_forward(w.v, h, T, v, pool_);
  if (spec.qk_norm) {
    norm_rows(norm, q, D, w.q_norm);
    norm_rows(norm, k, D, w.k_norm);
  }
  auto& kc = cache_.keys(l);
  auto& vc = cache_.values(l);
  const double rope_scale = c.rope.attention_factor;  // YaRN's; 1 otherwise
  for (std::int64_t t = 0; t < T; ++t) {
    const Row& row = rows_[std::size_t(t)];
    for (std::int64_t hd = 0; hd < Hq; ++hd)
      apply_rope(std::span(q).subspan(std::size_t((t * Hq + hd) * D), std::size_t(D)), inv_freq_,
                 row.position, rope_scale);
    for (std::int64_t hd = 0; hd < Hkv; ++hd)
      apply_rope(std::span(k).subspan(std::size_t((t * Hkv + hd) * D), std::size_t(D)), inv_freq_,
                 row.position, rope_scale);
    const std::int64_t s = cache_.slot(cache_.table(*row.item, l), row.position);
    std::copy_n(k.begin() + t * Hkv * D, Hkv * D, kc.begin() + s * Hkv * D);
    std::copy_n(v.begin() + t * Hkv * D, Hkv * D, vc.begin() + s * Hkv * D);
  }

  // Causal attention: the token at position p sees positions [first, p] of its own sequence,
  // first = 0 or, in a sliding window, p - window + 1; query head hd reads kv head
  // hd / (Hq / Hkv) (grouped-query attention). A sink adds its head's logit to the softmax.
  // A sliding layer reads its group's table (BatchItem::window_block_table) and nothing of it
  // before `first`: those blocks may have gone back to the pool.
  std::vector<float> attn(std::size_t(T * Hq * D));
  const float scale = 1.0f / std::sqrt(float(D));
  pool_.parallel_for(T * Hq, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> scores;
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t t = i / Hq, hd = i % Hq, kvh = hd / (Hq / Hkv);
      const Row& row = rows_[std::size_t(t)];
      const std::span<const int> table = cache_.table(*row.item, l);
      const std::int64_t first =
          spec.sliding_window > 0
              ? std::max<std::int64_t>(0, row.position - spec.sliding_window + 1)
              : 0;
      const std::int64_t n = row.position + 1 - first;
      const float* qv = q.data() + (t * Hq + hd) * D;
      scores.assign(std::size_t(n), 0.0f);
      for (std::int64_t p = 0; p < n; ++p) {
        const float* kv = kc.data() + (cache_.slot(table, int(first + p)) * Hkv + kvh) * D;
        float s = 0.0f;
        for (std::int64_t d = 0; d < D; ++d) s += qv[d] * kv[d];
        scores[std::size_t(p)] = s * scale;
      }
      if (spec.sinks)
        softmax_with_sink(scores, w.sinks[std::size_t(hd)]);
      else
        softmax(scores);
      float* out = attn.data() + (t * Hq + hd) * D;
      for (std::int64_t p = 0; p < n; ++p) {
        const float* vv = vc.data() + (cache_.slot(table, int(first + p)) * Hkv + kvh) * D;
        for (std::int64_t d = 0; d < D; ++d) out[d] += scores[std::size_t(p)] * vv[d];
      }
    }
  });
  if (spec.output_gate)
    for (std::size_t i = 0; i < attn.size(); ++i) attn[i] *= sigmoid(gate[i]);
  std::vector<float> o(std::size_t(T * H));
  linear_forward(w.o, attn, T, o, pool_);
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += o[i];
}

// Each sequence's rows run through the reference mixing (kernels/linear_attention) against its
// own state slot: chunked for a prompt's chunk, recurrent for a single token, the two forms
// agreeing to rounding; a verify step's tokens one by one, keeping each one's state. Sequences are
// independent, so they run in parallel.
void CpuForward::gated_deltanet(int l, model::NormKind norm,
                                const model::LinearAttentionSpec& spec) {
  const model::LinearAttentionWeights& w = w_.layers[std::size_t(l)].linear_attention;
  const kernels::GatedDeltaNetShape shape = deltanet_shape(spec);
  const std::int64_t T = std::int64_t(rows_.size()), H = w_.config.hidden_size;
  const std::int64_t QKVZ = shape.qkvz_width(), BA = shape.ba_width(), V = shape.value_dim();
  const std::vector<float> h = normed(norm, w_.layers[std::size_t(l)].input_norm);
  std::vector<float> qkvz(std::size_t(T * QKVZ)), ba(std::size_t(T * BA)),
      mixed(std::size_t(T * V));
  linear_forward(w.in_proj_qkvz, h, T, qkvz, pool_);
  linear_forward(w.in_proj_ba, h, T, ba, pool_);
  const kernels::GatedDeltaNetParams params{w.conv_weight, w.A_log, w.dt_bias, w.norm,
                                            w_.config.rms_norm_eps};
  std::vector<std::int64_t> first(items_.size() + 1, 0);
  for (std::size_t i = 0; i < items_.size(); ++i)
    first[i + 1] = first[i] + std::int64_t(items_[i].tokens.size());
  pool_.parallel_for(std::int64_t(items_.size()), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const BatchItem& item = items_[std::size_t(i)];
      const std::int64_t t0 = first[std::size_t(i)], n = std::int64_t(item.tokens.size());
      std::span<float> conv = cache_.conv_state(l, item.state_slot);
      std::span<float> state = cache_.delta_state(l, item.state_slot);
      if (item.start == 0) {  // a new (or recomputed) sequence starts from zeros
        std::fill(conv.begin(), conv.end(), 0.0f);
        std::fill(state.begin(), state.end(), 0.0f);
      }
      const auto mix = [&](std::int64_t t, std::int64_t count, bool chunked) {
        kernels::gated_deltanet_mix_ref(
            shape, count,
            std::span<const float>(qkvz).subspan(std::size_t(t * QKVZ), std::size_t(count * QKVZ)),
            std::span<const float>(ba).subspan(std::size_t(t * BA), std::size_t(count * BA)),
            params, conv, state,
            std::span(mixed).subspan(std::size_t(t * V), std::size_t(count * V)), chunked);
      };
      if (!CpuKvCache::keeps_states(item)) {
        mix(t0, n, /*chunked=*/n > 1);
        continue;
      }
      // A verify step: token by token (the recurrent form, as decoding without drafts computes
      // them), keeping the state after each for the rollback (cpu_kv_cache.h).
      for (std::int64_t j = 0; j < n; ++j) {
        mix(t0 + j, 1, /*chunked=*/false);
        std::ranges::copy(conv, cache_.kept_conv_state(l, item.state_slot, int(j)).begin());
        std::ranges::copy(state, cache_.kept_delta_state(l, item.state_slot, int(j)).begin());
      }
    }
  });
  std::vector<float> out(std::size_t(T * H));
  linear_forward(w.out_proj, mixed, T, out, pool_);
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += out[i];
}

// gpt-oss's expert: gate_up's rows alternate gate and up (ExpertLayout::kFusedInterleaved);
// down((up + 1) * gate * sigmoid(alpha * gate)) with gate clamped above and up both ways.
std::vector<float> CpuForward::clamped_swiglu(const model::Linear& gate_up,
                                              const model::Linear& down, const model::MoeSpec& spec,
                                              std::span<const float> x, std::int64_t rows) {
  const std::int64_t I = gate_up.out_features / 2;
  std::vector<float> gu(std::size_t(rows * 2 * I)), act(std::size_t(rows * I)),
      out(std::size_t(rows * down.out_features));
  linear_forward(gate_up, x, rows, gu, pool_);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < I; ++j)
      act[std::size_t(r * I + j)] = clamped_swiglu_value(gu[std::size_t(r * 2 * I + 2 * j)],
                                                         gu[std::size_t(r * 2 * I + 2 * j + 1)],
                                                         spec.swiglu_alpha, spec.swiglu_limit);
  linear_forward(down, act, rows, out, pool_);
  return out;
}

std::vector<float> CpuForward::swiglu(const model::Linear& gate, const model::Linear& up,
                                      const model::Linear& down, std::span<const float> x,
                                      std::int64_t rows) {
  const std::int64_t I = gate.out_features;
  std::vector<float> g(std::size_t(rows * I)), u(std::size_t(rows * I)),
      out(std::size_t(rows * down.out_features));
  linear_forward(gate, x, rows, g, pool_);
  linear_forward(up, x, rows, u, pool_);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
  linear_forward(down, g, rows, out, pool_);
  return out;
}

void CpuForward::mlp(int l, model::NormKind norm, const model::MlpSpec&) {
  const LayerWeights& w = w_.layers[std::size_t(l)];
  const std::vector<float> h = normed(norm, w.post_attention_norm);
  const auto out = swiglu(w.gate, w.up, w.down, h, std::int64_t(rows_.size()));
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += out[i];
}

// Each expert runs once over the tokens routed to it (moe_routing.h).
void CpuForward::moe(int l, model::NormKind norm, const model::MoeSpec& spec) {
  const LayerWeights& w = w_.layers[std::size_t(l)];
  const std::int64_t T = std::int64_t(rows_.size()), H = w_.config.hidden_size;
  const std::vector<float> h = normed(norm, w.post_attention_norm);
  const std::int64_t E = spec.experts;
  std::vector<float> router(std::size_t(T * E));
  linear_forward(w.router, h, T, router, pool_);
  const MoeRouting routing =
      route_tokens(router, T, spec.experts, spec.top_k, spec.norm_topk_prob, spec.routing);
  for (std::int64_t e = 0; e < E; ++e) {
    const std::int64_t first = routing.offsets[std::size_t(e)];
    const std::int64_t n = routing.offsets[std::size_t(e) + 1] - first;
    if (n == 0) continue;
    std::vector<float> xs(std::size_t(n * H));
    for (std::int64_t i = 0; i < n; ++i)
      std::copy_n(h.begin() + routing.token[std::size_t(first + i)] * H, H, xs.begin() + i * H);
    const auto& ex = w.experts[std::size_t(e)];
    auto out = spec.activation == model::ExpertActivation::kClampedSwiGlu
                   ? clamped_swiglu(ex.gate_up, ex.down, spec, xs, n)
                   : swiglu(ex.gate, ex.up, ex.down, xs, n);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t t = routing.token[std::size_t(first + i)];
      const float weight = routing.weight[std::size_t(first + i)];
      for (std::int64_t d = 0; d < H; ++d)
        x_[std::size_t(t * H + d)] += weight * out[std::size_t(i * H + d)];
    }
  }
  if (spec.shared_expert_intermediate_size == 0) return;
  // The shared expert runs on every token, scaled by sigmoid(shared_expert_gate(h)).
  const auto shared = swiglu(w.shared_gate, w.shared_up, w.shared_down, h, T);
  std::vector<float> scale(static_cast<std::size_t>(T));
  linear_forward(w.shared_expert_gate, h, T, scale, pool_);
  for (std::int64_t t = 0; t < T; ++t) {
    const float s = sigmoid(scale[std::size_t(t)]);
    for (std::int64_t d = 0; d < H; ++d)
      x_[std::size_t(t * H + d)] += s * shared[std::size_t(t * H + d)];
  }
}

// Logits for the last num_logits tokens of every item that wants them, in one lm_head pass.
void CpuForward::logits(model::NormKind norm) {
  const auto& c = w_.config;
  const std::int64_t H = c.hidden_size;
  std::int64_t first_row = 0;
  for (const BatchItem& item : items_) {
    const std::int64_t n = std::int64_t(item.tokens.size());
    if (!item.hidden_out.empty() && !kept_.empty()) {
      const std::int64_t width = c.hidden_state_width();
      std::copy_n(kept_.begin() + first_row * width, n * width, item.hidden_out.begin());
    } else if (!item.hidden_out.empty()) {
      std::copy_n(x_.begin() + first_row * H, n * H, item.hidden_out.begin());
      if (c.mtp_module) norm_rows(norm, item.hidden_out, H, w_.final_norm);
    }
    first_row += n;
  }
  std::vector<float> last;
  std::int64_t end_row = 0;
  for (const BatchItem& item : items_) {
    end_row += std::int64_t(item.tokens.size());
    if (item.logits.empty()) continue;
    last.insert(last.end(), x_.begin() + (end_row - item.num_logits) * H, x_.begin() + end_row * H);
  }
  if (last.empty()) return;
  const std::int64_t R = std::int64_t(last.size()) / H;
  norm_rows(norm, last, H, w_.final_norm);
  std::vector<float> out(std::size_t(R * c.logits_size()));
  linear_forward(w_.lm_head, last, R, out, pool_);
  auto from = out.begin();
  for (const BatchItem& item : items_) {
    if (item.logits.empty()) continue;
    std::copy_n(from, item.logits.size(), item.logits.begin());
    from += std::ptrdiff_t(item.logits.size());
  }
}

}  // namespace nibble::backend::cpu
