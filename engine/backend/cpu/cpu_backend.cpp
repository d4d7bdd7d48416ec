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

// Paged KV storage: per layer, [num_blocks * block_size, kv_heads * head_dim] for k and for v.
class CpuKvCache : public KvCache {
 public:
  CpuKvCache(const ModelConfig& c, int num_blocks, int block_size, const void* owner)
      : owner(owner),
        blocks(num_blocks),
        block(block_size),
        width(std::size_t(c.num_kv_heads) * std::size_t(c.head_dim)) {
    const std::size_t rows = std::size_t(num_blocks) * std::size_t(block_size);
    k.resize(std::size_t(c.num_layers));
    v.resize(std::size_t(c.num_layers));
    for (auto& layer : k) layer.resize(rows * width);
    for (auto& layer : v) layer.resize(rows * width);
  }
  int num_blocks() const override { return blocks; }
  int block_size() const override { return block; }

  const void* owner;
  int blocks, block;
  std::size_t width;
  std::vector<std::vector<float>> k, v;
};

// A sequence of its own (forward()): a private cache whose block table is the identity.
constexpr int kSequenceBlockSize = 16;
class CpuSequence : public SequenceState {
 public:
  CpuSequence(const ModelConfig& c, int capacity, const void* owner)
      : owner(owner),
        capacity_(capacity),
        cache(c, (capacity + kSequenceBlockSize - 1) / kSequenceBlockSize, kSequenceBlockSize,
              owner),
        table(std::size_t(cache.num_blocks())) {
    std::iota(table.begin(), table.end(), 0);
  }
  int length() const override { return length_; }
  int capacity() const override { return capacity_; }

  const void* owner;
  int capacity_;
  int length_ = 0;
  CpuKvCache cache;
  std::vector<int> table;
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
    if (!seq || seq->owner != this)
      throw BackendError("cpu backend: sequence state belongs to another backend");
    if (tokens.empty()) throw BackendError("cpu backend: forward needs at least one token");
    if (seq->length_ + std::int64_t(tokens.size()) > seq->capacity_)
      throw BackendError("cpu backend: " + std::to_string(tokens.size()) + " tokens after " +
                         std::to_string(seq->length_) + " exceed the sequence capacity " +
                         std::to_string(seq->capacity_));
    if (logits.size() != std::size_t(w_.config.vocab_size))
      throw BackendError("cpu backend: logits buffer holds " + std::to_string(logits.size()) +
                         " floats, vocab_size is " + std::to_string(w_.config.vocab_size));
    const BatchItem item{tokens, seq->length_, seq->table, logits};
    forward_batch(seq->cache, std::span(&item, 1));
    seq->length_ += int(tokens.size());
  }

  std::size_t kv_block_bytes(int block_size) const override {
    const auto& c = w_.config;
    return std::size_t(c.num_layers) * 2 * std::size_t(block_size) * std::size_t(c.num_kv_heads) *
           std::size_t(c.head_dim) * sizeof(float);
  }

  std::unique_ptr<KvCache> new_kv_cache(int num_blocks, int block_size) override {
    if (num_blocks < 1 || block_size < 1)
      throw BackendError("cpu backend: a KV cache needs at least one block of one position");
    return std::make_unique<CpuKvCache>(w_.config, num_blocks, block_size, this);
  }

  void forward_batch(KvCache& kv, std::span<const BatchItem> items) override {
    auto* cache = dynamic_cast<CpuKvCache*>(&kv);
    const auto& c = w_.config;
    if (!cache || cache->owner != this)
      throw BackendError("cpu backend: KV cache belongs to another backend");
    // Validate everything before touching the cache, so a bad call changes nothing.
    std::int64_t T = 0;
    for (const BatchItem& item : items) {
      if (item.tokens.empty()) throw BackendError("cpu backend: a batch item has no tokens");
      const std::int64_t end = std::int64_t(item.start) + std::int64_t(item.tokens.size());
      if (item.start < 0 || end > c.max_context)
        throw BackendError("cpu backend: positions up to " + std::to_string(end) +
                           " exceed the model's context of " + std::to_string(c.max_context));
      if (std::int64_t(item.block_table.size()) * cache->block < end)
        throw BackendError("cpu backend: a block table of " +
                           std::to_string(item.block_table.size()) + " blocks cannot hold " +
                           std::to_string(end) + " positions");
      for (int b : item.block_table)
        if (b < 0 || b >= cache->blocks)
          throw BackendError("cpu backend: block id " + std::to_string(b) +
                             " outside the cache's " + std::to_string(cache->blocks) + " blocks");
      if (!item.logits.empty() && item.logits.size() != std::size_t(c.vocab_size))
        throw BackendError("cpu backend: logits buffer holds " +
                           std::to_string(item.logits.size()) + " floats, vocab_size is " +
                           std::to_string(c.vocab_size));
      for (auto t : item.tokens)
        if (t < 0 || t >= c.vocab_size)
          throw BackendError("cpu backend: token id " + std::to_string(t) +
                             " outside vocabulary of " + std::to_string(c.vocab_size));
      T += std::int64_t(item.tokens.size());
    }
    if (T == 0) return;

    // Row t of the batch: which item it belongs to and its position in that sequence.
    std::vector<Row> rows;
    rows.reserve(std::size_t(T));
    for (std::size_t i = 0; i < items.size(); ++i)
      for (std::size_t j = 0; j < items[i].tokens.size(); ++j)
        rows.push_back({&items[i], items[i].start + int(j)});

    const std::int64_t H = c.hidden_size;
    std::vector<float> x(std::size_t(T * H));
    std::int64_t t = 0;
    for (const BatchItem& item : items)
      for (auto token : item.tokens)
        std::copy_n(w_.embed.begin() + std::int64_t(token) * H, H, x.begin() + H * t++);
    for (int l = 0; l < c.num_layers; ++l) {
      attention_block(l, *cache, rows, x);
      mlp_block(w_.layers[std::size_t(l)], x, T);
    }

    // Logits for the last token of every item that wants them, in one lm_head pass.
    std::vector<const BatchItem*> wanting;
    std::vector<float> last;
    std::int64_t end_row = 0;
    for (const BatchItem& item : items) {
      end_row += std::int64_t(item.tokens.size());
      if (item.logits.empty()) continue;
      wanting.push_back(&item);
      last.insert(last.end(), x.begin() + (end_row - 1) * H, x.begin() + end_row * H);
    }
    if (wanting.empty()) return;
    const std::int64_t R = std::int64_t(wanting.size());
    cpu::rms_norm(last, H, w_.final_norm, c.rms_norm_eps);
    std::vector<float> logits(std::size_t(R * c.vocab_size));
    cpu::linear_forward(w_.lm_head, last, R, logits, pool_);
    for (std::int64_t r = 0; r < R; ++r)
      std::copy_n(logits.begin() + r * c.vocab_size, c.vocab_size,
                  wanting[std::size_t(r)]->logits.begin());
  }

 private:
  struct Row {
    const BatchItem* item;
    int position;
  };

  // The cache row holding `position` of the sequence that `item` belongs to.
  static std::int64_t slot(const CpuKvCache& cache, const BatchItem& item, int position) {
    return std::int64_t(item.block_table[std::size_t(position / cache.block)]) * cache.block +
           position % cache.block;
  }

  void attention_block(int l, CpuKvCache& cache, const std::vector<Row>& rows,
                       std::vector<float>& x) {
    const auto& c = w_.config;
    const LayerWeights& w = w_.layers[std::size_t(l)];
    const std::int64_t T = std::int64_t(rows.size());
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
    auto& kc = cache.k[std::size_t(l)];
    auto& vc = cache.v[std::size_t(l)];
    for (std::int64_t t = 0; t < T; ++t) {
      const int position = rows[std::size_t(t)].position;
      for (std::int64_t hd = 0; hd < Hq; ++hd)
        cpu::apply_rope(std::span(q).subspan(std::size_t((t * Hq + hd) * D), std::size_t(D)),
                        inv_freq_, position);
      for (std::int64_t hd = 0; hd < Hkv; ++hd)
        cpu::apply_rope(std::span(k).subspan(std::size_t((t * Hkv + hd) * D), std::size_t(D)),
                        inv_freq_, position);
      const std::int64_t s = slot(cache, *rows[std::size_t(t)].item, position);
      std::copy_n(k.begin() + t * Hkv * D, Hkv * D, kc.begin() + s * Hkv * D);
      std::copy_n(v.begin() + t * Hkv * D, Hkv * D, vc.begin() + s * Hkv * D);
    }

    // Causal attention: the token at position p sees positions [0, p] of its own sequence;
    // query head hd reads kv head hd / (Hq / Hkv) (grouped-query attention).
    std::vector<float> attn(std::size_t(T * Hq * D));
    const float scale = 1.0f / std::sqrt(float(D));
    pool_.parallel_for(T * Hq, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> scores;
      for (std::int64_t i = begin; i < end; ++i) {
        const std::int64_t t = i / Hq, hd = i % Hq, kvh = hd / (Hq / Hkv);
        const Row& row = rows[std::size_t(t)];
        const std::int64_t n = row.position + 1;
        const float* qv = q.data() + (t * Hq + hd) * D;
        scores.assign(std::size_t(n), 0.0f);
        for (std::int64_t p = 0; p < n; ++p) {
          const float* kv = kc.data() + (slot(cache, *row.item, int(p)) * Hkv + kvh) * D;
          float s = 0.0f;
          for (std::int64_t d = 0; d < D; ++d) s += qv[d] * kv[d];
          scores[std::size_t(p)] = s * scale;
        }
        cpu::softmax(scores);
        float* out = attn.data() + (t * Hq + hd) * D;
        for (std::int64_t p = 0; p < n; ++p) {
          const float* vv = vc.data() + (slot(cache, *row.item, int(p)) * Hkv + kvh) * D;
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
