#include "engine/backend/cuda/cuda_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "engine/backend/batch_checks.h"
#include "engine/backend/cuda/device_model.h"
#include "engine/backend/cuda/layer_ops.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/step_layout.h"
#include "engine/backend/cuda/step_timer.h"
#include "engine/backend/moe_routing.h"

namespace nibble::backend {
namespace {

using cuda::check;
using cuda::DeviceBuffer;
using cuda::PinnedBuffer;
using model::ModelConfig;
using bf16 = std::uint16_t;

// Per layer: K then V, each [num_blocks * block_size, Hkv, D] BF16, in one allocation.
class CudaKvCache : public KvCache {
 public:
  CudaKvCache(const ModelConfig& c, int num_blocks, int block_size, const void* owner)
      : owner(owner),
        blocks(num_blocks),
        block(block_size),
        layer_elems(std::size_t(num_blocks) * std::size_t(block_size) *
                    std::size_t(c.num_kv_heads) * std::size_t(c.head_dim)),
        storage(layer_elems * 2 * std::size_t(c.num_layers)) {}
  int num_blocks() const override { return blocks; }
  int block_size() const override { return block; }
  bf16* k(int layer) const { return storage.get() + layer_elems * 2 * std::size_t(layer); }
  bf16* v(int layer) const { return k(layer) + layer_elems; }

  const void* owner;
  int blocks, block;
  std::size_t layer_elems;
  DeviceBuffer<bf16> storage;
};

// Activations of one step, grown to the largest step seen (or reserved up front).
struct Activations {
  DeviceBuffer<bf16> x, x2, h, q, k, v, qkv, attn, gate, up, routed, expert_out, last, scratch;
  DeviceBuffer<float> router, logits;
  void ensure(const ModelConfig& c, std::int64_t T, std::int64_t R) {
    const auto H = std::size_t(c.hidden_size), D = std::size_t(c.head_dim);
    const auto t = std::size_t(T), K = std::size_t(std::max(1, c.num_experts_per_tok));
    for (auto* b : {&x, &x2, &h}) b->ensure(t * H);
    q.ensure(t * std::size_t(c.num_heads) * D);
    attn.ensure(t * std::size_t(c.num_heads) * D);
    k.ensure(t * std::size_t(c.num_kv_heads) * D);
    v.ensure(t * std::size_t(c.num_kv_heads) * D);
    qkv.ensure(t * std::size_t(c.num_heads + 2 * c.num_kv_heads) * D);
    const std::size_t mlp =
        std::max(std::size_t(c.intermediate_size),
                 c.num_experts > 0 ? K * std::size_t(c.moe_intermediate_size) : 0);
    gate.ensure(t * 2 * mlp);  // a fused gate_up projection's output
    up.ensure(t * mlp);        // the SwiGLU middle
    if (c.num_experts > 0) {
      routed.ensure(t * K * H);
      expert_out.ensure(t * K * H);
      router.ensure(t * std::size_t(c.num_experts));
    }
    last.ensure(std::size_t(std::max<std::int64_t>(R, 1)) * H);
    logits.ensure(std::size_t(std::max<std::int64_t>(R, 1)) * std::size_t(c.vocab_size));
    scratch.ensure(std::size_t(std::max<std::int64_t>(R, 1)) * std::size_t(c.vocab_size));
  }
};

constexpr std::int64_t kMaxSplitRows = 256;  // split-K workspace: rows of partial sums

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(model::ModelWeights weights) {
    const auto& wc = weights.config;
    if (wc.head_dim % 8 != 0 || wc.head_dim > 256 || wc.num_heads % wc.num_kv_heads != 0)
      throw BackendError(
          "cuda backend: runs head_dim 8..256 in steps of 8 with num_heads a "
          "multiple of num_kv_heads; this model has head_dim " +
          std::to_string(wc.head_dim));
    check(cudaFree(nullptr), "creating the CUDA context");
    std::size_t total = 0;
    check(cudaMemGetInfo(&free_at_start_, &total), "cudaMemGetInfo");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    m_ = cuda::upload_model(std::move(weights));
    const auto& c = m_.config;
    linears_ = std::make_unique<cuda::LinearRunner>(stream_, kMaxSplitRows, m_.widest_nvfp4);
    shape_ = {c.num_heads, c.num_kv_heads, c.head_dim};
    rows_per_tile_ = cuda::attention_rows_per_tile(shape_);
    timer_ = std::make_unique<cuda::StepTimer>(stream_);
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device),
          "reading the SM count");
  }
  ~CudaBackend() override {
    timer_.reset();
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
  }

  std::string name() const override { return "cuda"; }
  const ModelConfig& config() const override { return m_.config; }

  std::size_t kv_block_bytes(int block_size) const override {
    const auto& c = m_.config;
    return std::size_t(c.num_layers) * 2 * std::size_t(block_size) * std::size_t(c.num_kv_heads) *
           std::size_t(c.head_dim) * sizeof(bf16);
  }

  std::unique_ptr<KvCache> new_kv_cache(int num_blocks, int block_size) override {
    if (num_blocks < 1 || block_size < 1)
      throw BackendError("cuda backend: a KV cache needs at least one block of one position");
    return std::make_unique<CudaKvCache>(m_.config, num_blocks, block_size, this);
  }

  // vLLM's meaning of --gpu-memory-utilization: the share of the device THIS engine may take
  // (weights, activations, KV cache), so that engines sharing a GPU can split it; never more than
  // is free now, less a margin for cuBLAS and the allocator.
  std::size_t device_memory_for_kv(double utilization, int max_tokens, int max_sequences) override {
    act_.ensure(m_.config, max_tokens, max_sequences);
    std::size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    const double own = double(free_at_start_ > free ? free_at_start_ - free : 0);
    const double margin = 256.0 * (1 << 20);
    const double budget = std::min(double(total) * utilization - own, double(free) - margin);
    spdlog::info(
        "cuda backend: this engine holds {} MiB (weights {} MiB), {} MiB free of {} MiB; "
        "--gpu-memory-utilization {:.2f} leaves {:.0f} MiB for the KV cache",
        std::size_t(own) >> 20, m_.bytes >> 20, free >> 20, total >> 20, utilization,
        std::max(budget, 0.0) / (1 << 20));
    return budget > 0 ? std::size_t(budget) : 0;
  }

  void forward_batch(KvCache& kv, std::span<const BatchItem> items) override {
    auto* cache = dynamic_cast<CudaKvCache*>(&kv);
    if (!cache || cache->owner != this)
      throw BackendError("cuda backend: KV cache belongs to another backend");
    const auto& c = m_.config;
    const std::int64_t T = check_batch(c, "cuda", *cache, items);
    if (T == 0) return;
    if (cache->blocks * std::int64_t(cache->block) > INT32_MAX)
      throw BackendError("cuda backend: a KV cache of more than 2^31 positions");

    const cuda::StepLayout layout = cuda::layout_step(items, cache->block, rows_per_tile_);
    const cuda::PackedStep packed = cuda::pack_step(layout);
    const auto R = std::int64_t(layout.logit_rows.size());
    act_.ensure(c, T, R);
    staging_.ensure(packed.bytes.size());
    step_.ensure(packed.bytes.size());
    std::copy(packed.bytes.begin(), packed.bytes.end(), staging_.get());
    check(cudaMemcpyAsync(step_.get(), staging_.get(), packed.bytes.size(), cudaMemcpyHostToDevice,
                          stream_),
          "copying the step's layout");
    const std::byte* meta = step_.get();
    const auto* tokens = reinterpret_cast<const std::int32_t*>(meta + packed.tokens);
    const auto H = c.hidden_size;
    timer_->mark("start");
    check(cuda::embed_rows(m_.embed.get(), tokens, int(T), H, act_.x.get(), stream_), "embed_rows");
    timer_->mark("embed");

    cuda::RopeStoreArgs rope;
    rope.positions = reinterpret_cast<const std::int32_t*>(meta + packed.positions);
    rope.slots = reinterpret_cast<const std::int64_t*>(meta + packed.slots);
    rope.inv_freq = m_.inv_freq.get();
    rope.eps = c.rms_norm_eps;
    rope.tokens = int(T);
    rope.q_heads = c.num_heads;
    rope.kv_heads = c.num_kv_heads;
    rope.head_dim = c.head_dim;
    cuda::PagedAttentionArgs attention;
    attention.block_tables = reinterpret_cast<const std::int32_t*>(meta + packed.block_tables);
    attention.block_size = cache->block;
    attention.tiles = reinterpret_cast<const cuda::AttentionTile*>(meta + packed.tiles);
    attention.num_tiles = int(layout.tiles.size());
    attention.shape = shape_;
    attention.scale = 1.0f / std::sqrt(float(c.head_dim));
    attention.rows = int(T);
    attention.max_position = *std::max_element(layout.positions.begin(), layout.positions.end());
    attention.sm_count = sm_count_;
    attention_work_.ensure(cuda::paged_attention_workspace_floats(
        shape_, int(T),
        cuda::paged_attention_splits(shape_, attention.num_tiles, attention.max_position,
                                     sm_count_)));
    attention.workspace = attention_work_.get();
    attention.workspace_floats = attention_work_.size();

    for (int l = 0; l < c.num_layers; ++l) {
      const cuda::DeviceLayer& w = m_.layers[std::size_t(l)];
      // Attention: x -> x2 = x + o(attention(rope(q, k), v)).
      check(cuda::rms_norm(act_.x.get(), w.input_norm.get(), int(T), H, c.rms_norm_eps,
                           act_.h.get(), stream_),
            "rms_norm");
      const std::int64_t q_width = std::int64_t(c.num_heads) * c.head_dim,
                         kv_width = std::int64_t(c.num_kv_heads) * c.head_dim;
      if (w.fused_qkv) {
        linears_->run(w.qkv, act_.h.get(), T, nullptr, act_.qkv.get());
        rope.q_in = act_.qkv.get();
        rope.k = act_.qkv.get() + q_width;
        rope.v = act_.qkv.get() + q_width + kv_width;
        rope.q_stride = rope.kv_stride = q_width + 2 * kv_width;
      } else {
        linears_->run(w.q, act_.h.get(), T, nullptr, act_.q.get());
        linears_->run(w.k, act_.h.get(), T, nullptr, act_.k.get());
        linears_->run(w.v, act_.h.get(), T, nullptr, act_.v.get());
        rope.q_in = act_.q.get();
        rope.k = act_.k.get();
        rope.v = act_.v.get();
        rope.q_stride = q_width;
        rope.kv_stride = kv_width;
      }
      timer_->mark("norm+qkv");
      rope.q_out = act_.q.get();
      rope.q_norm = w.q_norm.empty() ? nullptr : w.q_norm.get();
      rope.k_norm = w.k_norm.empty() ? nullptr : w.k_norm.get();
      rope.k_cache = cache->k(l);
      rope.v_cache = cache->v(l);
      check(cuda::rope_and_store_kv(rope, stream_), "rope_and_store_kv");
      timer_->mark("rope+kv store");
      attention.q = act_.q.get();
      attention.k_cache = cache->k(l);
      attention.v_cache = cache->v(l);
      attention.out = act_.attn.get();
      check(cuda::paged_attention(attention, stream_), "paged_attention");
      timer_->mark("attention");
      linears_->run(w.o, act_.attn.get(), T, act_.x.get(), act_.x2.get());
      timer_->mark("o");
      // MLP: x2 -> x = x2 + mlp(norm(x2)).
      check(cuda::rms_norm(act_.x2.get(), w.post_attention_norm.get(), int(T), H, c.rms_norm_eps,
                           act_.h.get(), stream_),
            "rms_norm");
      if (w.moe) {
        experts(w, T);
      } else {
        swiglu(w.mlp, act_.h.get(), T, act_.x2.get(), act_.x.get(), 0);
      }
      timer_->mark(w.moe ? "norm+moe" : "norm+mlp");
    }
    if (R > 0) logits(items, meta + packed.logit_rows, R);
    check(cudaStreamSynchronize(stream_), "running the step");
    timer_->end_step(long(T));
  }

 private:
  // out = residual + down(silu(gate(in)) * up(in)); the projections' outputs go to act_.gate,
  // the middle to act_.up, both from row `offset` on (an expert's slice of the routed rows).
  void swiglu(const cuda::DeviceMlp& mlp, const bf16* in, std::int64_t rows, const bf16* residual,
              bf16* out, std::int64_t offset) {
    const std::int64_t width = mlp.width();
    bf16* projected = act_.gate.get() + offset * 2 * width;
    bf16* middle = act_.up.get() + offset * width;
    if (mlp.fused) {
      linears_->run(mlp.gate_up, in, rows, nullptr, projected);
      check(cuda::silu_mul_halves(projected, rows, width, middle, stream_), "silu_mul_halves");
    } else {
      linears_->run(mlp.gate, in, rows, nullptr, projected);
      linears_->run(mlp.up, in, rows, nullptr, projected + rows * width);
      check(cuda::silu_mul(projected, projected + rows * width, rows * width, middle, stream_),
            "silu_mul");
    }
    linears_->run(mlp.down, middle, rows, residual, out);
  }

  // Routing needs the router's scores on the host (moe_routing.h): one synchronisation per MoE
  // layer. Each expert then runs over its slice of the gathered rows.
  void experts(const cuda::DeviceLayer& w, std::int64_t T) {
    const auto& c = m_.config;
    const int E = c.num_experts, K = c.num_experts_per_tok, H = c.hidden_size;
    linears_->run_float(w.router, act_.h.get(), T, act_.router.get(), act_.scratch);
    router_host_.ensure(std::size_t(T) * std::size_t(E));
    check(cudaMemcpyAsync(router_host_.get(), act_.router.get(), std::size_t(T * E) * 4,
                          cudaMemcpyDeviceToHost, stream_),
          "copying router scores");
    check(cudaStreamSynchronize(stream_), "running the router");
    const MoeRouting r =
        route_tokens(std::span(router_host_.get(), std::size_t(T * E)), T, E, K, c.norm_topk_prob);
    const std::size_t n = std::size_t(T * K);
    std::vector<float> weight(n);
    for (std::size_t i = 0; i < n; ++i) weight[i] = r.weight[std::size_t(r.source[i])];
    // One upload: routed rows' tokens, each token's sources, their weights.
    moe_host_.ensure(3 * n);
    std::copy(r.token.begin(), r.token.end(), reinterpret_cast<std::int32_t*>(moe_host_.get()));
    std::copy(r.source.begin(), r.source.end(),
              reinterpret_cast<std::int32_t*>(moe_host_.get() + n));
    std::copy(weight.begin(), weight.end(), reinterpret_cast<float*>(moe_host_.get() + 2 * n));
    moe_device_.ensure(3 * n);
    check(cudaMemcpyAsync(moe_device_.get(), moe_host_.get(), 3 * n * 4, cudaMemcpyHostToDevice,
                          stream_),
          "copying the routing");
    const auto* token = reinterpret_cast<const std::int32_t*>(moe_device_.get());
    const auto* source = reinterpret_cast<const std::int32_t*>(moe_device_.get() + n);
    const auto* weights = reinterpret_cast<const float*>(moe_device_.get() + 2 * n);
    check(cuda::gather_rows(act_.h.get(), token, int(n), H, act_.routed.get(), stream_),
          "gather_rows");
    for (int e = 0; e < E; ++e) {
      const std::int64_t first = r.offsets[std::size_t(e)],
                         rows = r.offsets[std::size_t(e) + 1] - first;
      if (rows == 0) continue;
      swiglu(w.experts[std::size_t(e)], act_.routed.get() + first * H, rows, nullptr,
             act_.expert_out.get() + first * H, first);
    }
    check(cuda::combine_experts(act_.x2.get(), act_.expert_out.get(), source, weights, int(T), K, H,
                                act_.x.get(), stream_),
          "combine_experts");
  }

  void logits(std::span<const BatchItem> items, const std::byte* rows_meta, std::int64_t R) {
    const auto& c = m_.config;
    const auto* rows = reinterpret_cast<const std::int32_t*>(rows_meta);
    check(cuda::gather_rows(act_.x.get(), rows, int(R), c.hidden_size, act_.last.get(), stream_),
          "gather_rows");
    check(cuda::rms_norm(act_.last.get(), m_.final_norm.get(), int(R), c.hidden_size,
                         c.rms_norm_eps, act_.last.get(), stream_),
          "rms_norm");
    // Logits through BF16, as vLLM computes them: cuBLAS's BF16 matrix-vector path is its
    // fastest for the lm_head (the widest matrix of the model).
    act_.scratch.ensure(std::size_t(R) * std::size_t(c.vocab_size));
    linears_->run(m_.lm_head, act_.last.get(), R, nullptr, act_.scratch.get());
    check(cuda::bf16_to_float(act_.scratch.get(), R * c.vocab_size, act_.logits.get(), stream_),
          "bf16_to_float");
    timer_->mark("final norm+lm_head");
    const std::size_t V = std::size_t(c.vocab_size);
    logits_host_.ensure(std::size_t(R) * V);
    check(cudaMemcpyAsync(logits_host_.get(), act_.logits.get(), std::size_t(R) * V * 4,
                          cudaMemcpyDeviceToHost, stream_),
          "copying logits");
    check(cudaStreamSynchronize(stream_), "running the step");
    timer_->mark("logits to host");
    std::size_t r = 0;
    for (const BatchItem& item : items) {
      if (item.logits.empty()) continue;
      std::copy_n(logits_host_.get() + r++ * V, V, item.logits.begin());
    }
  }

  std::size_t free_at_start_ = 0;  // device memory free before this backend took any
  cudaStream_t stream_ = nullptr;
  cuda::DeviceModel m_;
  std::unique_ptr<cuda::LinearRunner> linears_;
  cuda::AttentionShape shape_;
  int rows_per_tile_ = 1;
  int sm_count_ = 0;
  DeviceBuffer<float> attention_work_;  // split-key partial softmaxes (decode steps)
  Activations act_;
  std::unique_ptr<cuda::StepTimer> timer_;
  PinnedBuffer<std::byte> staging_;
  DeviceBuffer<std::byte> step_;
  PinnedBuffer<float> router_host_, logits_host_;
  PinnedBuffer<std::uint32_t> moe_host_;
  DeviceBuffer<std::uint32_t> moe_device_;
};

}  // namespace

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    if (why != nullptr) *why = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device";
    return false;
  }
  return true;
}

std::unique_ptr<Backend> make_cuda_backend(model::ModelWeights weights) {
  std::string why;
  if (!cuda_device_available(&why)) throw BackendError("cuda backend: " + why);
  cudaDeviceProp prop{};
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  spdlog::info("cuda backend: {} (sm_{}{}, {} SMs, {} MiB)", prop.name, prop.major, prop.minor,
               prop.multiProcessorCount, prop.totalGlobalMem >> 20);
  return std::make_unique<CudaBackend>(std::move(weights));
}

}  // namespace nibble::backend
