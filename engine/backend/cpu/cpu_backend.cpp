#include "engine/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "engine/backend/batch_checks.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/moe_routing.h"
#include "engine/runtime/thread_pool.h"

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

class CpuBackend : public Backend {
 public:
  CpuBackend(model::ModelWeights w, int threads)
      : w_(std::move(w)),
        pool_(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()))),
        inv_freq_(cpu::rope_inverse_frequencies(w_.config.rope, w_.config.head_dim)) {}

  std::string name() const override { return "cpu"; }
  std::string kv_cache_dtype() const override { return "fp32"; }
  const ModelConfig& config() const override { return w_.config; }

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
    const std::int64_t T = check_batch(c, "cpu", *cache, items);
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
    // Each expert runs once over the tokens routed to it (moe_routing.h).
    const std::int64_t E = c.num_experts;
    std::vector<float> router(std::size_t(T * E));
    cpu::linear_forward(w.router, h, T, router, pool_);
    const MoeRouting routing =
        route_tokens(router, T, c.num_experts, c.num_experts_per_tok, c.norm_topk_prob);
    for (std::int64_t e = 0; e < E; ++e) {
      const std::int64_t first = routing.offsets[std::size_t(e)];
      const std::int64_t n = routing.offsets[std::size_t(e) + 1] - first;
      if (n == 0) continue;
      std::vector<float> xs(std::size_t(n * H));
      for (std::int64_t i = 0; i < n; ++i)
        std::copy_n(h.begin() + routing.token[std::size_t(first + i)] * H, H, xs.begin() + i * H);
      const auto& ex = w.experts[std::size_t(e)];
      auto out = swiglu(ex.gate, ex.up, ex.down, xs, n);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t t = routing.token[std::size_t(first + i)];
        const float weight = routing.weight[std::size_t(first + i)];
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
