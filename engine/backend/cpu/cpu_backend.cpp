#include "engine/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cpu/thread_pool.h"

namespace nibble::backend {
namespace {

using cpu::ThreadPool;
using model::LayerWeights;
using model::ModelConfig;

// One sequence's KV cache: per layer, [capacity, kv_heads * head_dim] for k and for v.
class CpuSequence : public SequenceState {
 public:
  CpuSequence(const ModelConfig& c, int capacity, const void* owner)
      : owner(owner), capacity_(capacity), width(std::size_t(c.num_kv_heads) * c.head_dim) {
    k.resize(std::size_t(c.num_layers));
    v.resize(std::size_t(c.num_layers));
    for (auto& layer : k) layer.resize(std::size_t(capacity) * width);
    for (auto& layer : v) layer.resize(std::size_t(capacity) * width);
  }
  int length() const override { return length_; }
  int capacity() const override { return capacity_; }

  const void* owner;
  int capacity_;
  int length_ = 0;
  std::size_t width;
  std::vector<std::vector<float>> k, v;
};

class CpuBackend : public Backend {
 public:
  CpuBackend(model::ModelWeights w, int threads)
      : w_(std::move(w)),
        pool_(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()))),
        inv_freq_(cpu::rope_inverse_frequencies(w_.config.rope, w_.config.head_dim)) {}

  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return w_.config; }

  std::unique_ptr<SequenceState> new_sequence(int max_tokens) override {
    if (max_tokens < 1 || max_tokens > w_.config.max_context)
      throw BackendError("cpu backend: a sequence needs 1.." +
                         std::to_string(w_.config.max_context) + " positions, asked for " +
                         std::to_string(max_tokens));
    return std::make_unique<CpuSequence>(w_.config, max_tokens, this);
  }

  void forward(SequenceState& state, std::span<const std::int32_t> tokens,
               std::span<float> logits) override {
    auto* seq = dynamic_cast<CpuSequence*>(&state);
    const auto& c = w_.config;
    if (!seq || seq->owner != this)
      throw BackendError("cpu backend: sequence state belongs to another backend");
    if (tokens.empty()) throw BackendError("cpu backend: forward needs at least one token");
    if (seq->length_ + std::int64_t(tokens.size()) > seq->capacity_)
      throw BackendError("cpu backend: " + std::to_string(tokens.size()) + " tokens after " +
                         std::to_string(seq->length_) + " exceed the sequence capacity " +
                         std::to_string(seq->capacity_));
    if (logits.size() != std::size_t(c.vocab_size))
      throw BackendError("cpu backend: logits buffer holds " + std::to_string(logits.size()) +
                         " floats, vocab_size is " + std::to_string(c.vocab_size));
    for (auto t : tokens)
      if (t < 0 || t >= c.vocab_size)
        throw BackendError("cpu backend: token id " + std::to_string(t) +
                           " outside vocabulary of " + std::to_string(c.vocab_size));

    const std::int64_t T = std::int64_t(tokens.size()), H = c.hidden_size;
    std::vector<float> x(std::size_t(T * H));
    for (std::int64_t t = 0; t < T; ++t)
      std::copy_n(w_.embed.begin() + std::int64_t(tokens[std::size_t(t)]) * H, H,
                  x.begin() + t * H);
    for (int l = 0; l < c.num_layers; ++l) {
      attention_block(l, *seq, x, T);
      mlp_block(w_.layers[std::size_t(l)], x, T);
    }
    seq->length_ += int(T);
    std::vector<float> last(x.end() - H, x.end());
    cpu::rms_norm(last, H, w_.final_norm, c.rms_norm_eps);
    cpu::linear_forward(w_.lm_head, last, 1, logits, pool_);
  }

 private:
  void attention_block(int l, CpuSequence& seq, std::vector<float>& x, std::int64_t T) {
    const auto& c = w_.config;
    const LayerWeights& w = w_.layers[std::size_t(l)];
    const std::int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
    std::vector<float> h = x;
    cpu::rms_norm(h, H, w.input_norm, c.rms_norm_eps);
    std::vector<float> q(std::size_t(T * Hq * D)), k(std::size_t(T * Hkv * D)),
        v(std::size_t(T * Hkv * D));
    cpu::linear_forward(w.q, h, T, q, pool_);
    cpu::linear_forward(w.k, h, T, k, pool_);
    cpu::linear_forward(w.v, h, T, v, pool_);
    if (c.qk_norm) {
      cpu::rms_norm(q, D, w.q_norm, c.rms_norm_eps);
      cpu::rms_norm(k, D, w.k_norm, c.rms_norm_eps);
    }
    const int start = seq.length_;
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t hd = 0; hd < Hq; ++hd)
        cpu::apply_rope(std::span(q).subspan(std::size_t((t * Hq + hd) * D), std::size_t(D)),
                        inv_freq_, start + int(t));
      for (std::int64_t hd = 0; hd < Hkv; ++hd)
        cpu::apply_rope(std::span(k).subspan(std::size_t((t * Hkv + hd) * D), std::size_t(D)),
                        inv_freq_, start + int(t));
    }
    auto& kc = seq.k[std::size_t(l)];
    auto& vc = seq.v[std::size_t(l)];
    std::copy(k.begin(), k.end(), kc.begin() + std::int64_t(start) * Hkv * D);
    std::copy(v.begin(), v.end(), vc.begin() + std::int64_t(start) * Hkv * D);

    // Causal attention: token t sees positions [0, start + t]; query head hd reads kv head
    // hd / (Hq / Hkv) (grouped-query attention).
    std::vector<float> attn(std::size_t(T * Hq * D));
    const float scale = 1.0f / std::sqrt(float(D));
    pool_.parallel_for(T * Hq, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> scores;
      for (std::int64_t i = begin; i < end; ++i) {
        const std::int64_t t = i / Hq, hd = i % Hq, kvh = hd / (Hq / Hkv);
        const std::int64_t n = start + t + 1;
        const float* qv = q.data() + (t * Hq + hd) * D;
        scores.assign(std::size_t(n), 0.0f);
        for (std::int64_t p = 0; p < n; ++p) {
          const float* kv = kc.data() + (p * Hkv + kvh) * D;
          float s = 0.0f;
          for (std::int64_t d = 0; d < D; ++d) s += qv[d] * kv[d];
          scores[std::size_t(p)] = s * scale;
        }
        cpu::softmax(scores);
        float* out = attn.data() + (t * Hq + hd) * D;
        for (std::int64_t p = 0; p < n; ++p) {
          const float* vv = vc.data() + (p * Hkv + kvh) * D;
          for (std::int64_t d = 0; d < D; ++d) out[d] += scores[std::size_t(p)] * vv[d];
        }
      }
    });
    std::vector<float> o(std::size_t(T * H));
    cpu::linear_forward(w.o, attn, T, o, pool_);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  }

  // SwiGLU: down(silu(gate(x)) * up(x)) for the rows of x (x is [T, H]).
  std::vector<float> swiglu(const model::Linear& gate, const model::Linear& up,
                            const model::Linear& down, std::span<const float> x, std::int64_t T) {
    const std::int64_t I = gate.out_features;
    std::vector<float> g(std::size_t(T * I)), u(std::size_t(T * I)),
        out(std::size_t(T * down.out_features));
    cpu::linear_forward(gate, x, T, g, pool_);
    cpu::linear_forward(up, x, T, u, pool_);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = cpu::silu(g[i]) * u[i];
    cpu::linear_forward(down, g, T, out, pool_);
    return out;
  }

  void mlp_block(const LayerWeights& w, std::vector<float>& x, std::int64_t T) {
    const auto& c = w_.config;
    const std::int64_t H = c.hidden_size;
    std::vector<float> h = x;
    cpu::rms_norm(h, H, w.post_attention_norm, c.rms_norm_eps);
    if (!w.moe) {
      auto out = swiglu(w.gate, w.up, w.down, h, T);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += out[i];
      return;
    }
    // Router: softmax over all experts, keep the top k, renormalize when norm_topk_prob.
    const std::int64_t E = c.num_experts, K = c.num_experts_per_tok;
    std::vector<float> router(std::size_t(T * E));
    cpu::linear_forward(w.router, h, T, router, pool_);
    std::vector<std::vector<std::pair<std::int64_t, float>>> routed(static_cast<std::size_t>(E));
    for (std::int64_t t = 0; t < T; ++t) {
      std::span<float> probs(router.data() + t * E, std::size_t(E));
      cpu::softmax(probs);
      std::vector<std::int64_t> order(static_cast<std::size_t>(E));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
        return probs[std::size_t(a)] > probs[std::size_t(b)];
      });
      float sum = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) sum += probs[std::size_t(order[std::size_t(k)])];
      for (std::int64_t k = 0; k < K; ++k) {
        const auto e = order[std::size_t(k)];
        const float p = probs[std::size_t(e)];
        routed[std::size_t(e)].push_back({t, c.norm_topk_prob ? p / sum : p});
      }
    }
    // Each expert runs once over the tokens routed to it.
    for (std::int64_t e = 0; e < E; ++e) {
      const auto& tokens = routed[std::size_t(e)];
      if (tokens.empty()) continue;
      const std::int64_t n = std::int64_t(tokens.size());
      std::vector<float> xs(std::size_t(n * H));
      for (std::int64_t i = 0; i < n; ++i)
        std::copy_n(h.begin() + tokens[std::size_t(i)].first * H, H, xs.begin() + i * H);
      const auto& ex = w.experts[std::size_t(e)];
      auto out = swiglu(ex.gate, ex.up, ex.down, xs, n);
      for (std::int64_t i = 0; i < n; ++i) {
        const auto [t, weight] = tokens[std::size_t(i)];
        for (std::int64_t d = 0; d < H; ++d)
          x[std::size_t(t * H + d)] += weight * out[std::size_t(i * H + d)];
      }
    }
  }

  model::ModelWeights w_;
  ThreadPool pool_;
  std::vector<double> inv_freq_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(model::ModelWeights weights, int threads) {
  return std::make_unique<CpuBackend>(std::move(weights), threads);
}

}  // namespace nibble::backend
