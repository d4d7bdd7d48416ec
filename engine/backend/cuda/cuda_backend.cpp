#include "engine/backend/cuda/cuda_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "engine/backend/batch_checks.h"
#include "engine/backend/cuda/decode_graphs.h"
#include "engine/backend/cuda/device_model.h"
#include "engine/backend/cuda/device_sampler.h"
#include "engine/backend/cuda/step_layout.h"
#include "engine/backend/cuda/step_timer.h"
#include "engine/backend/moe_routing.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/layer/layer_ops.h"
#include "kernels/moe/moe_experts.h"

namespace nibble::backend {
namespace {

using cuda::check;
using cuda::DeviceBuffer;
using cuda::PinnedBuffer;
using model::ModelConfig;
using bf16 = std::uint16_t;

// Per layer: K then V, each [(num_blocks + 1) * block_size, Hkv, D] BF16, in one allocation; or,
// with an FP8 cache (kernels/attention/kv_fp8_ref.h), K codes, V codes [rows, Hkv, D] E4M3 then
// K scales, V scales [rows, Hkv] BF16. The block after the last one the engine may use is
// scratch: the rows that pad a decode step up to its graph's size write their keys and values
// there.
class CudaKvCache : public KvCache {
 public:
  CudaKvCache(const ModelConfig& c, int num_blocks, int block_size, bool fp8, const void* owner)
      : owner(owner),
        blocks(num_blocks),
        block(block_size),
        fp8(fp8),
        row_elems(std::size_t(num_blocks + 1) * std::size_t(block_size) *
                  std::size_t(c.num_kv_heads) * std::size_t(c.head_dim)),
        scale_elems(std::size_t(num_blocks + 1) * std::size_t(block_size) *
                    std::size_t(c.num_kv_heads)),
        layer_bytes(layer_bytes_for(row_elems, scale_elems, fp8)),
        storage(layer_bytes * std::size_t(c.num_layers)) {
    // Padding rows read the scratch block too: keep what they compute finite.
    check(cudaMemset(storage.get(), 0, storage.size()), "clearing the KV cache");
  }
  int num_blocks() const override { return blocks; }
  int block_size() const override { return block; }
  int scratch_block() const { return blocks; }
  std::byte* layer(int l) const { return storage.get() + layer_bytes * std::size_t(l); }
  bf16* k(int l) const { return fp8 ? nullptr : reinterpret_cast<bf16*>(layer(l)); }
  bf16* v(int l) const { return fp8 ? nullptr : k(l) + row_elems; }
  std::uint8_t* k8(int l) const {
    return fp8 ? reinterpret_cast<std::uint8_t*>(layer(l)) : nullptr;
  }
  std::uint8_t* v8(int l) const { return fp8 ? k8(l) + row_elems : nullptr; }
  bf16* k_scale(int l) const { return fp8 ? reinterpret_cast<bf16*>(v8(l) + row_elems) : nullptr; }
  bf16* v_scale(int l) const { return fp8 ? k_scale(l) + scale_elems : nullptr; }

  // Layers start 256-byte aligned (the kernels read 16-byte pieces).
  static std::size_t layer_bytes_for(std::size_t row_elems, std::size_t scale_elems, bool fp8) {
    const std::size_t bytes =
        fp8 ? 2 * row_elems + 2 * scale_elems * sizeof(bf16) : 2 * row_elems * sizeof(bf16);
    return (bytes + 255) / 256 * 256;
  }

  const void* owner;
  int blocks, block;
  bool fp8;
  std::size_t row_elems, scale_elems, layer_bytes;
  DeviceBuffer<std::byte> storage;
  cuda::DecodeGraphs graphs;  // captured against this storage
};

// Activations of one step, grown to the largest step seen (or reserved up front).
struct Activations {
  DeviceBuffer<bf16> x, x2, h, q, k, v, qkv, attn, gate, up, routed, expert_out, last, scratch;
  DeviceBuffer<float> router, logits;
  DeviceBuffer<std::int32_t> moe_routing;   // the device routing's arrays (kernels/moe)
  DeviceBuffer<std::int32_t> moe_arrivals;  // the fused combine's counts (zeroed by the route)
  // Returns true when a buffer was reallocated (graphs captured before read the old ones).
  bool ensure(const ModelConfig& c, std::int64_t T, std::int64_t R) {
    const auto H = std::size_t(c.hidden_size), D = std::size_t(c.head_dim);
    const auto t = std::size_t(T), K = std::size_t(std::max(1, c.num_experts_per_tok));
    bool grew = false;
    auto grow = [&](auto& buffer, std::size_t n) {
      grew |= n > buffer.size();
      buffer.ensure(n);
    };
    for (auto* b : {&x, &x2, &h}) grow(*b, t * H);
    grow(q, t * std::size_t(c.num_heads) * D);
    grow(attn, t * std::size_t(c.num_heads) * D);
    grow(k, t * std::size_t(c.num_kv_heads) * D);
    grow(v, t * std::size_t(c.num_kv_heads) * D);
    grow(qkv, t * std::size_t(c.num_heads + 2 * c.num_kv_heads) * D);
    const std::size_t mlp =
        std::max(std::size_t(c.intermediate_size),
                 c.num_experts > 0 ? K * std::size_t(c.moe_intermediate_size) : 0);
    grow(gate, t * 2 * mlp);  // a fused gate_up projection's output
    grow(up, t * mlp);        // the SwiGLU middle
    if (c.num_experts > 0) {
      grow(routed, t * K * H);
      grow(expert_out, t * K * H);
      grow(router, t * std::size_t(c.num_experts));
      grow(moe_routing, std::size_t(kernels::moe_routing_words(T, c.num_experts, int(K), 1)));
      const std::size_t arrival_words = moe_arrivals.size();
      grow(moe_arrivals, std::size_t(kernels::moe_arrival_words(T, c.hidden_size)));
      if (moe_arrivals.size() != arrival_words) {  // zeros before the first use (moe_experts.h)
        check(cudaMemset(moe_arrivals.get(), 0, moe_arrivals.size() * sizeof(std::int32_t)),
              "zeroing the MoE arrival counts");
        check(cudaDeviceSynchronize(), "zeroing the MoE arrival counts");
      }
    }
    const auto rows = std::size_t(std::max<std::int64_t>(R, 1));
    grow(last, rows * H);
    grow(logits, rows * std::size_t(c.vocab_size));
    // Also the router's BF16 scores (run_float): sized here, so that no step grows it behind the
    // back of the graphs that read it.
    grow(scratch, std::max(rows * std::size_t(c.vocab_size), t * std::size_t(c.num_experts)));
    return grew;
  }
};

// Device addresses of one step's inputs (step_layout.h).
struct StepInputs {
  const std::int32_t* tokens = nullptr;
  const std::int32_t* positions = nullptr;
  const std::int64_t* slots = nullptr;
  const kernels::AttentionTile* tiles = nullptr;
  const std::int32_t* block_tables = nullptr;
  const std::int32_t* logit_rows = nullptr;
  int decode_tiles = -1;  // attention tiles of one row, -1: unknown (paged_attention.h)
};

constexpr std::int64_t kMaxSplitRows = 256;  // split-K workspace: rows of partial sums
// The smallest block size the graphs' block-table room is sized for (the engine's is 16).
constexpr int kTableBlockSize = 16;

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
    linears_ = std::make_unique<cuda::LinearRunner>(stream_, kMaxSplitRows, m_.widest_nvfp4,
                                                    m_.largest_nvfp4);
    shape_ = {c.num_heads, c.num_kv_heads, c.head_dim};
    rows_per_tile_ = kernels::attention_rows_per_tile(shape_);
    timer_ = std::make_unique<cuda::StepTimer>(stream_);
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device),
          "reading the SM count");
    const char* graphs = std::getenv("NIBBLE_CUDA_GRAPHS");
    graphs_enabled_ = graphs == nullptr || std::string(graphs) != "0";
    const char* host_routing = std::getenv("NIBBLE_MOE_HOST_ROUTING");
    host_routing_ = host_routing != nullptr && std::string(host_routing) == "1";
    // The MoE decode fusions (kernels/moe/moe_experts.h), on unless switched off (A/B).
    const char* moe_fused = std::getenv("NIBBLE_MOE_FUSED");
    const char* moe_fused_router = std::getenv("NIBBLE_MOE_FUSED_ROUTER");
    moe_fused_ = moe_fused == nullptr || std::string(moe_fused) != "0";
    moe_fused_router_ =
        moe_fused_ && (moe_fused_router == nullptr || std::string(moe_fused_router) != "0");
    moe_router_form_ = kernels::moe_router_form_from_name(std::getenv("NIBBLE_MOE_ROUTER_FORM"));
    const char* route_in_gemm = std::getenv("NIBBLE_MOE_ROUTE_IN_GEMM");
    moe_route_in_gemm_ = route_in_gemm == nullptr || std::string(route_in_gemm) != "0";
    const char* one_launch = std::getenv("NIBBLE_MOE_ONE_LAUNCH");
    moe_one_launch_ = one_launch == nullptr || std::string(one_launch) != "0";
    const char* moe_prefetch = std::getenv("NIBBLE_MOE_PREFETCH");
    moe_prefetch_ = moe_prefetch != nullptr && std::string(moe_prefetch) == "1";
    moe_on_device_ = true;
    if (c.num_experts > 0) {
      for (const cuda::DeviceLayer& layer : m_.layers)
        if (layer.moe && !routes_on_device(layer)) moe_on_device_ = false;
      if (moe_on_device_) {
        check(kernels::w4a16_grouped_prepare(), "preparing the MoE kernels");
        kernels::moe_prefetch_budget();  // its device queries before any graph capture
      }
      spdlog::info("cuda backend: MoE layers routed {}",
                   moe_on_device_  ? "on the device (grouped experts)"
                   : host_routing_ ? "on the host (NIBBLE_MOE_HOST_ROUTING=1)"
                                   : "on the host (experts not NVFP4 in "
                                     "one shape); no decode graphs");
      if (moe_on_device_)
        spdlog::info(
            "cuda backend: MoE decode fusions {}, router in the route {} (form {}, "
            "L2 prefetch {}), one token routed in the expert GEMMs {} ({})",
            moe_fused_ ? "on" : "off (NIBBLE_MOE_FUSED=0)",
            moe_fused_router_ ? "on (BF16 routers, <= 8 tokens)" : "off",
            kernels::moe_router_form_name(moe_router_form_), moe_prefetch_ ? "on" : "off",
            moe_route_in_gemm_ ? "on" : "off (NIBBLE_MOE_ROUTE_IN_GEMM=0)",
            moe_one_launch_ ? "gate_up and down in one launch where the device holds its blocks"
                            : "two launches, NIBBLE_MOE_ONE_LAUNCH=0");
    }
    const char* sampling = std::getenv("NIBBLE_DEVICE_SAMPLING");
    device_sampling_ = sampling == nullptr || std::string(sampling) != "0";
    const bool silu_pairs =
        std::any_of(m_.layers.begin(), m_.layers.end(),
                    [](const cuda::DeviceLayer& l) { return l.mlp.gate_up_pairs; });
    const bool rope_pairs =
        std::any_of(m_.layers.begin(), m_.layers.end(),
                    [](const cuda::DeviceLayer& l) { return l.qkv_rope_pairs; });
    spdlog::info(
        "cuda backend: paired weight layouts (their decode fusions are deleted, "
        "kernels/layer/PERF_NOTES.md): gate_up {} (NIBBLE_FUSE_SILU), qkv {} (NIBBLE_FUSE_ROPE=1)",
        silu_pairs ? "on" : "off", rope_pairs ? "on" : "off");
    sampler_ = std::make_unique<cuda::DeviceSampler>(c.vocab_size);
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

  // BF16, or FP8 E4M3 with a BF16 scale per (token, KV head) row: 2 * D + 2 bytes of keys and
  // values per row instead of 4 * D.
  std::size_t kv_block_bytes(int block_size) const override {
    const auto& c = m_.config;
    const std::size_t rows = std::size_t(block_size) * std::size_t(c.num_kv_heads);
    const std::size_t per_row = kv_fp8_ ? 2 * std::size_t(c.head_dim) + 2 * sizeof(bf16)
                                        : 2 * std::size_t(c.head_dim) * sizeof(bf16);
    return std::size_t(c.num_layers) * rows * per_row;
  }

  bool set_kv_cache_dtype(KvCacheDtype dtype) override {
    if (dtype == KvCacheDtype::kFp8 && !kernels::paged_attention_fp8_supported(shape_))
      return false;
    kv_fp8_ = dtype == KvCacheDtype::kFp8;
    return true;
  }
  std::string kv_cache_dtype() const override { return kv_fp8_ ? "fp8" : "bf16"; }

  std::unique_ptr<KvCache> new_kv_cache(int num_blocks, int block_size) override {
    if (num_blocks < 1 || block_size < 1)
      throw BackendError("cuda backend: a KV cache needs at least one block of one position");
    return std::make_unique<CudaKvCache>(m_.config, num_blocks, block_size, kv_fp8_, this);
  }

  // vLLM's meaning of --gpu-memory-utilization: the share of the device THIS engine may take
  // (weights, activations, KV cache), so that engines sharing a GPU can split it; never more than
  // is free now, less a margin for cuBLAS and the allocator. The decode graphs' buffers are
  // taken here too, before the KV cache is sized.
  std::size_t device_memory_for_kv(double utilization, int max_tokens, int max_sequences) override {
    if (max_sequences >= 1 && max_sequences != graph_rows_) {
      graph_rows_ = max_sequences;
      buckets_ = cuda::decode_buckets(graph_rows_);
      graph_attention_floats_ = 0;
      graph_step_ = {};
    }
    reserve(max_tokens, max_sequences, 0);
    if (graphs_enabled_) reserve_graph_buffers();
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

  bool samples_on_device() const override { return device_sampling_; }
  void set_decode_graphs(bool enabled) override { graphs_enabled_ = enabled; }
  std::uint64_t decode_graph_replays() const override { return graph_replays_; }

  // Captures every bucket's graphs for `kv` up front (a progress line per bucket), so that no
  // serving step pays for a capture.
  void prepare_decode(KvCache& kv) override {
    if (!graphs_enabled_ || !moe_on_device_) return;
    CudaKvCache& cache = own_cache(kv);
    reserve_graph_buffers();
    std::size_t free_before = 0, free_after = 0, total = 0;
    check(cudaMemGetInfo(&free_before, &total), "cudaMemGetInfo");
    const auto start = std::chrono::steady_clock::now();
    std::size_t captured = 0;
    try {
      for (std::size_t i = 0; i < buckets_.size(); ++i) {
        const int rows = buckets_[i];
        for (int splits : split_counts(rows)) {
          const cuda::DecodeGraphKey key{rows, splits, device_sampling_};
          if (cache.graphs.find(key, buffers_epoch_) != nullptr) continue;
          // One eager run first: whatever a kernel or cuBLAS sets up on first use happens
          // outside the capture. Padding rows only: nothing but the scratch block is written.
          std::size_t bytes = cuda::pack_decode_step({}, cache.block, rows, cache.scratch_block(),
                                                     graph_at_, graph_host_);
          if (key.sampled) bytes = pack_graph_sampling({}, rows, bytes);
          upload_graph_inputs(bytes);
          enqueue_forward(cache, rows, rows, graph_inputs(), rows, splits, false);
          if (key.sampled) enqueue_graph_sampling(rows);
          check(cudaStreamSynchronize(stream_), "warming up a decode bucket");
          capture(cache, key);
          ++captured;
        }
        spdlog::info("cuda backend: captured decode graphs for batch size {} ({}/{} buckets)", rows,
                     i + 1, buckets_.size());
      }
    } catch (const BackendError& e) {
      spdlog::warn("cuda backend: decode graphs off, capturing failed: {}", e.what());
      graphs_enabled_ = false;
      cache.graphs.clear();
      return;
    }
    check(cudaMemGetInfo(&free_after, &total), "cudaMemGetInfo");
    spdlog::info("cuda backend: {} decode graphs for batch sizes 1..{} in {:.2f} s, {} MiB",
                 captured, graph_rows_,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                 (free_before > free_after ? free_before - free_after : 0) >> 20);
  }

  void forward_batch(KvCache& kv, std::span<const BatchItem> items) override {
    run_step(kv, items, nullptr);
  }

  // The host work runs while the step's forward pass (graph or eager) is on the GPU; the step's
  // sampling is enqueued after it, reading the bitmasks it wrote.
  void forward_batch_overlapping(KvCache& kv, std::span<const BatchItem> items,
                                 const HostWork& host_work) override {
    run_step(kv, items, &host_work);
  }

 private:
  void run_step(KvCache& kv, std::span<const BatchItem> items, const HostWork* host_work) {
    CudaKvCache& cache = own_cache(kv);
    const auto& c = m_.config;
    const std::int64_t T = check_batch(c, "cuda", cache, items, device_sampling_);
    if (T == 0) {
      if (host_work != nullptr) (*host_work)();
      return;
    }
    if (cache.blocks * std::int64_t(cache.block) > INT32_MAX)
      throw BackendError("cuda backend: a KV cache of more than 2^31 positions");
    if (decode_with_graph(cache, items, host_work)) return;

    const cuda::StepLayout layout = cuda::layout_step(items, cache.block, rows_per_tile_);
    const cuda::PackedStep packed = cuda::pack_step(layout);
    const auto R = std::int64_t(layout.logit_rows.size());
    const int num_tiles = int(layout.tiles.size());
    const int max_position = *std::max_element(layout.positions.begin(), layout.positions.end());
    // One tile per row: a step of decodes (the decode kernel's own split rule).
    const int splits =
        num_tiles == T
            ? kernels::paged_decode_splits(shape_, int(T), max_position, sm_count_)
            : kernels::paged_attention_splits(shape_, num_tiles, max_position, sm_count_);
    reserve(T, R, kernels::paged_attention_workspace_floats(shape_, int(T), splits));
    staging_.ensure(packed.bytes.size());
    step_.ensure(packed.bytes.size());
    std::copy(packed.bytes.begin(), packed.bytes.end(), staging_.get());
    check(cudaMemcpyAsync(step_.get(), staging_.get(), packed.bytes.size(), cudaMemcpyHostToDevice,
                          stream_),
          "copying the step's layout");
    const std::byte* meta = step_.get();
    StepInputs in;
    in.tokens = reinterpret_cast<const std::int32_t*>(meta + packed.tokens);
    in.positions = reinterpret_cast<const std::int32_t*>(meta + packed.positions);
    in.slots = reinterpret_cast<const std::int64_t*>(meta + packed.slots);
    in.tiles = reinterpret_cast<const kernels::AttentionTile*>(meta + packed.tiles);
    in.block_tables = reinterpret_cast<const std::int32_t*>(meta + packed.block_tables);
    in.logit_rows = reinterpret_cast<const std::int32_t*>(meta + packed.logit_rows);
    in.decode_tiles =
        int(std::count_if(layout.tiles.begin(), layout.tiles.end(),
                          [](const kernels::AttentionTile& t) { return t.rows == 1; }));
    timer_->mark("start");
    enqueue_forward(cache, T, R, in, num_tiles, splits, true);
    run_host_work(host_work);
    if (R > 0 && samples_in(items)) {
      if (sampler_->reserve(int(R), items)) ++buffers_epoch_;
      sampler_->upload(items, int(R), stream_);
      sampler_->enqueue(act_.logits.get(), int(R), stream_);
      check(cudaStreamSynchronize(stream_), "running the step");
      timer_->mark("sampling");
      sampler_->deliver(items);
    } else if (R > 0) {
      logits_to_host(items);
    }
    check(cudaStreamSynchronize(stream_), "running the step");
    timer_->end_step(long(T));
  }

  // Runs a step's host work while the GPU computes. If it throws, the step's enqueued work is
  // waited for first, so that the next step may rewrite the pinned inputs it is still copying.
  void run_host_work(const HostWork* host_work) {
    if (host_work == nullptr) return;
    try {
      (*host_work)();
    } catch (...) {
      (void)cudaStreamSynchronize(stream_);
      throw;
    }
    timer_->mark("idle for host work");  // GPU time: what the host work left exposed
  }

  CudaKvCache& own_cache(KvCache& kv) const {
    auto* cache = dynamic_cast<CudaKvCache*>(&kv);
    if (!cache || cache->owner != this)
      throw BackendError("cuda backend: KV cache belongs to another backend");
    return *cache;
  }

  // Grows the activation and attention buffers for steps of T rows (R sampled); a growth moves
  // buffers that captured graphs read, so it retires them.
  void reserve(std::int64_t T, std::int64_t R, std::size_t attention_floats) {
    bool grew = act_.ensure(m_.config, T, R);
    if (attention_floats > attention_work_.size()) {
      attention_work_.ensure(attention_floats);
      grew = true;
    }
    if (grew) ++buffers_epoch_;
  }

  // The split counts a decode step of `rows` sequences can take at any context length: every
  // power of two up to the longest context's (paged_decode_splits' contract).
  const std::vector<int>& split_counts(int rows) {
    auto [it, inserted] = split_counts_.try_emplace(rows);
    if (inserted) {
      const int most = kernels::paged_decode_splits(
          shape_, rows, std::max(m_.config.max_context - 1, 0), sm_count_);
      for (int splits = 1; splits <= most; splits *= 2) it->second.push_back(splits);
    }
    return it->second;
  }

  // Buffers every bucket's graphs read: activations for the largest bucket, the attention
  // workspace for its most split step, and the fixed-address step inputs. Sized once; cheap on
  // every later step.
  void reserve_graph_buffers() {
    if (buckets_.empty()) buckets_ = cuda::decode_buckets(graph_rows_);
    if (graph_attention_floats_ == 0) {
      for (int rows : buckets_)
        for (int splits : split_counts(rows))
          graph_attention_floats_ =
              std::max(graph_attention_floats_,
                       kernels::paged_attention_workspace_floats(shape_, rows, splits));
      graph_attention_floats_ = std::max<std::size_t>(graph_attention_floats_, 1);
    }
    reserve(graph_rows_, graph_rows_, graph_attention_floats_);
    // Device sampling's inputs ride in the same blob: room for a bitmask on every row and 4 MiB
    // of penalty lists; a step that needs more samples eagerly.
    const std::size_t sampling_room =
        device_sampling_
            ? std::size_t(graph_rows_) * (sampler_->bitmask_words() + 2) * 4 + (4 << 20)
            : 0;
    if (sampler_->reserve(graph_rows_, {}, sampling_room / 8)) ++buffers_epoch_;
    if (!graph_step_.empty()) return;
    graph_at_ = cuda::decode_step_offsets(graph_rows_);
    // Block tables: the scratch table plus a table covering the whole context per sequence.
    const std::size_t tables =
        1 + std::size_t(graph_rows_) *
                std::size_t((m_.config.max_context + kTableBlockSize - 1) / kTableBlockSize);
    const std::size_t bytes = graph_at_.block_tables + tables * 4 + sampling_room;
    graph_step_.ensure(bytes);
    staging_.ensure(bytes);
    ++buffers_epoch_;
  }

  StepInputs graph_inputs() const {
    const std::byte* meta = graph_step_.get();
    StepInputs in;
    in.tokens = reinterpret_cast<const std::int32_t*>(meta + graph_at_.tokens);
    in.positions = reinterpret_cast<const std::int32_t*>(meta + graph_at_.positions);
    in.slots = reinterpret_cast<const std::int64_t*>(meta + graph_at_.slots);
    in.tiles = reinterpret_cast<const kernels::AttentionTile*>(meta + graph_at_.tiles);
    in.block_tables = reinterpret_cast<const std::int32_t*>(meta + graph_at_.block_tables);
    in.logit_rows = reinterpret_cast<const std::int32_t*>(meta + graph_at_.logit_rows);
    return in;
  }

  void upload_graph_inputs(std::size_t bytes) {
    std::copy_n(graph_host_.begin(), bytes, staging_.get());
    check(
        cudaMemcpyAsync(graph_step_.get(), staging_.get(), bytes, cudaMemcpyHostToDevice, stream_),
        "copying the decode step's inputs");
  }

  // Captures the forward pass of a decode step of key.rows rows with key.splits attention splits,
  // and the device sampling of its rows when key.sampled.
  cudaGraphExec_t capture(CudaKvCache& cache, const cuda::DecodeGraphKey& key) {
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
          "starting a decode graph capture");
    try {
      enqueue_forward(cache, key.rows, key.rows, graph_inputs(), key.rows, key.splits, false);
      if (key.sampled) enqueue_graph_sampling(key.rows);
    } catch (...) {
      (void)cudaStreamEndCapture(stream_, &graph);
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw;
    }
    check(cudaStreamEndCapture(stream_, &graph), "ending a decode graph capture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    check(err, "instantiating a decode graph");
    cache.graphs.store(key, exec, buffers_epoch_);
    return exec;
  }

  // A step of decodes only (one token per sequence, each sampled) runs as the replay of its
  // bucket's graph; returns false when the step must run eagerly (a prefill chunk in it, a MoE
  // model whose routing goes through the host, graphs off, more sequences than the largest
  // bucket).
  // With host work that writes bitmasks (structured outputs, overlapped), the replay is of the
  // forward-only graph and the sampling pass is launched eagerly after the host work: a sampled
  // graph would read the bitmasks before they are written. Other steps replay as before.
  bool decode_with_graph(CudaKvCache& cache, std::span<const BatchItem> items,
                         const HostWork* host_work) {
    if (!graphs_enabled_ || !moe_on_device_) return false;
    int max_position = 0;
    for (const BatchItem& item : items) {
      if (item.tokens.size() != 1 || !wants_next_token(item)) return false;
      max_position = std::max(max_position, item.start);
    }
    const bool sampled = samples_in(items);
    const bool sample_after = sampled && host_work != nullptr && bitmasks_in(items);
    if (buckets_.empty()) buckets_ = cuda::decode_buckets(graph_rows_);
    const int rows = cuda::decode_bucket_for(int(items.size()), buckets_);
    if (rows == 0) return false;
    const cuda::DecodeGraphKey key{
        rows, kernels::paged_decode_splits(shape_, rows, max_position, sm_count_),
        sampled && !sample_after};
    try {
      reserve_graph_buffers();
      // Before the graph is looked up: a sampler buffer that grows retires the graphs.
      if (sample_after && sampler_->reserve(int(items.size()), items)) ++buffers_epoch_;
      std::size_t bytes = cuda::pack_decode_step(items, cache.block, rows, cache.scratch_block(),
                                                 graph_at_, graph_host_);
      if (key.sampled) bytes = pack_graph_sampling(items, rows, bytes);
      if (bytes > graph_step_.size()) return false;
      cudaGraphExec_t exec = cache.graphs.find(key, buffers_epoch_);
      if (exec == nullptr) exec = capture(cache, key);
      upload_graph_inputs(bytes);
      timer_->mark("start");
      check(cudaGraphLaunch(exec, stream_), "replaying a decode graph");
      ++graph_replays_;
      timer_->mark("decode graph");
    } catch (const BackendError& e) {
      spdlog::warn("cuda backend: decode graphs off, running eagerly: {}", e.what());
      graphs_enabled_ = false;
      cache.graphs.clear();
      return false;
    }
    run_host_work(host_work);
    if (sample_after) {
      // The real rows only: they come first in the graph's logits, in item order.
      sampler_->upload(items, int(items.size()), stream_);
      sampler_->enqueue(act_.logits.get(), int(items.size()), stream_);
      timer_->mark("sampling");
    }
    if (sampled) {
      check(cudaStreamSynchronize(stream_), "running the step");
      sampler_->deliver(items);
    } else {
      logits_to_host(items);
    }
    check(cudaStreamSynchronize(stream_), "running the step");
    timer_->end_step(long(items.size()));
    return true;
  }

  // Enqueues the forward pass of T rows, R of them sampled (their FP32 logits left in
  // act_.logits), on stream_. No allocation and, unless MoE layers route on the host, no host
  // synchronisation: a decode graph captures exactly this. `timed`: StepTimer marks between the
  // phases.
  void enqueue_forward(CudaKvCache& cache, std::int64_t T, std::int64_t R, const StepInputs& in,
                       int num_tiles, int splits, bool timed) {
    const auto& c = m_.config;
    auto mark = [&](const char* phase) {
      if (timed) timer_->mark(phase);
    };
    const auto H = c.hidden_size;
    check(kernels::embed_rows(m_.embed.get(), in.tokens, int(T), H, act_.x.get(), stream_),
          "embed_rows");
    mark("embed");

    kernels::RopeStoreArgs rope;
    rope.positions = in.positions;
    rope.slots = in.slots;
    rope.inv_freq = m_.inv_freq.get();
    rope.eps = c.rms_norm_eps;
    rope.tokens = int(T);
    rope.q_heads = c.num_heads;
    rope.kv_heads = c.num_kv_heads;
    rope.head_dim = c.head_dim;
    kernels::PagedAttentionArgs attention;
    attention.block_tables = in.block_tables;
    attention.block_size = cache.block;
    attention.tiles = in.tiles;
    attention.num_tiles = num_tiles;
    attention.shape = shape_;
    attention.scale = 1.0f / std::sqrt(float(c.head_dim));
    attention.rows = int(T);
    attention.sm_count = sm_count_;
    attention.splits = splits;
    attention.workspace = attention_work_.get();
    attention.workspace_floats = attention_work_.size();
    attention.decode_tiles = in.decode_tiles;

    for (int l = 0; l < c.num_layers; ++l) {
      const cuda::DeviceLayer& w = m_.layers[std::size_t(l)];
      // Attention: x -> x2 = x + o(attention(rope(q, k), v)).
      const std::int64_t q_width = std::int64_t(c.num_heads) * c.head_dim,
                         kv_width = std::int64_t(c.num_kv_heads) * c.head_dim;
      // The RoPE / KV store arguments first: the qkv linear may store q, k and v itself.
      rope.q_out = act_.q.get();
      rope.q_norm = w.q_norm.empty() ? nullptr : w.q_norm.get();
      rope.k_norm = w.k_norm.empty() ? nullptr : w.k_norm.get();
      // Layer l's KV cache, BF16 or FP8 (the rope store's and the attention's arguments).
      auto point_at_cache = [&](auto& args) {
        args.k_cache = cache.k(l);
        args.v_cache = cache.v(l);
        args.k_cache8 = cache.k8(l);
        args.v_cache8 = cache.v8(l);
        args.k_scale = cache.k_scale(l);
        args.v_scale = cache.v_scale(l);
      };
      point_at_cache(rope);
      rope.paired = w.fused_qkv && w.qkv_rope_pairs;
      check(kernels::rms_norm(act_.x.get(), w.input_norm.get(), int(T), H, c.rms_norm_eps,
                              act_.h.get(), stream_),
            "rms_norm");
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
      mark("norm+qkv");
      check(kernels::rope_and_store_kv(rope, stream_), "rope_and_store_kv");
      mark("rope+kv store");
      attention.q = act_.q.get();
      point_at_cache(attention);
      attention.out = act_.attn.get();
      check(kernels::paged_attention(attention, stream_), "paged_attention");
      mark("attention");
      linears_->run(w.o, act_.attn.get(), T, act_.x.get(), act_.x2.get());
      mark("o");
      // MLP: x2 -> x = x2 + mlp(norm(x2)).
      if (w.moe) {
        check(kernels::rms_norm(act_.x2.get(), w.post_attention_norm.get(), int(T), H,
                                c.rms_norm_eps, act_.h.get(), stream_),
              "rms_norm");
        experts(w, T);
      } else {
        normed_swiglu(w.mlp, act_.x2.get(), w.post_attention_norm.get(), T, act_.x.get());
      }
      mark(w.moe ? "norm+moe" : "norm+mlp");
    }
    if (R == 0) return;
    // The sampled rows' last hidden states, gathered and normed in one launch.
    check(kernels::rms_norm_rows(act_.x.get(), in.logit_rows, m_.final_norm.get(), int(R), H,
                                 c.rms_norm_eps, act_.last.get(), stream_),
          "rms_norm_rows");
    // Logits through BF16, as vLLM computes them: cuBLAS's BF16 matrix-vector path is its
    // fastest for the lm_head (the widest matrix of the model).
    linears_->run(m_.lm_head, act_.last.get(), R, nullptr, act_.scratch.get());
    check(kernels::bf16_to_float(act_.scratch.get(), R * c.vocab_size, act_.logits.get(), stream_),
          "bf16_to_float");
    mark("final norm+lm_head");
  }

  // Appends the step's device sampling requests to a decode graph's inputs (graph_host_, packed
  // up to `bytes`): parameters at graph_at_.sampling, lists and bitmasks after the block tables.
  // Returns the bytes to copy.
  std::size_t pack_graph_sampling(std::span<const BatchItem> items, int rows, std::size_t bytes) {
    const std::size_t words = sampler_->bitmask_words();
    const std::size_t start = ((bytes - graph_at_.block_tables) / 4 + 1) / 2 * 2;
    const std::size_t room =
        graph_at_.block_tables + (start + cuda::sampling_tail_words(items, words) + 1) * 4;
    if (graph_host_.size() < room) graph_host_.resize(room);
    const std::size_t end = cuda::pack_sampling(
        items, rows, words,
        reinterpret_cast<kernels::SamplingRow*>(graph_host_.data() + graph_at_.sampling),
        reinterpret_cast<std::uint32_t*>(graph_host_.data() + graph_at_.block_tables), start);
    return graph_at_.block_tables + end * 4;
  }

  // The sampling pass over a decode graph's rows, reading pack_graph_sampling's inputs.
  void enqueue_graph_sampling(int rows) {
    sampler_->enqueue(
        act_.logits.get(), rows,
        reinterpret_cast<const kernels::SamplingRow*>(graph_step_.get() + graph_at_.sampling),
        graph_step_.get() + graph_at_.block_tables, stream_);
  }

  static bool samples_in(std::span<const BatchItem> items) {
    return std::any_of(items.begin(), items.end(),
                       [](const BatchItem& item) { return item.sample != nullptr; });
  }
  static bool bitmasks_in(std::span<const BatchItem> items) {
    return std::any_of(items.begin(), items.end(), [](const BatchItem& item) {
      return item.sample != nullptr && !item.sample->bitmask.empty();
    });
  }

  // Copies the logits of the step's sampled rows (the first of act_.logits, in item order) into
  // the items' buffers; synchronises the stream.
  void logits_to_host(std::span<const BatchItem> items) {
    const std::size_t V = std::size_t(m_.config.vocab_size);
    std::size_t R = 0;
    for (const BatchItem& item : items) R += item.logits.empty() ? 0 : 1;
    logits_host_.ensure(R * V);
    check(cudaMemcpyAsync(logits_host_.get(), act_.logits.get(), R * V * 4, cudaMemcpyDeviceToHost,
                          stream_),
          "copying logits");
    check(cudaStreamSynchronize(stream_), "running the step");
    timer_->mark("logits to host");
    std::size_t r = 0;
    for (const BatchItem& item : items) {
      if (item.logits.empty()) continue;
      std::copy_n(logits_host_.get() + r++ * V, V, item.logits.begin());
    }
  }

  // A dense layer's MLP block: out = x + down(silu(gate(h)) * up(h)), h = rms_norm(x) with weight
  // `norm` (act_.h).
  void normed_swiglu(const cuda::DeviceMlp& mlp, const bf16* x, const float* norm,
                     std::int64_t rows, bf16* out) {
    const auto& c = m_.config;
    check(
        kernels::rms_norm(x, norm, int(rows), c.hidden_size, c.rms_norm_eps, act_.h.get(), stream_),
        "rms_norm");
    swiglu(mlp, act_.h.get(), rows, x, out, 0);
  }

  // out = residual + down(silu(gate(in)) * up(in)); the projections' outputs go to act_.gate,
  // the middle to act_.up, both from row `offset` on (an expert's slice of the routed rows).
  void swiglu(const cuda::DeviceMlp& mlp, const bf16* in, std::int64_t rows, const bf16* residual,
              bf16* out, std::int64_t offset) {
    const std::int64_t width = mlp.width();
    bf16* projected = act_.gate.get() + offset * 2 * width;
    bf16* middle = act_.up.get() + offset * width;
    if (mlp.gate_up_pairs) {
      // Weight rows in gate / up pairs: the unpairing SiLU kernel.
      linears_->run(mlp.gate_up, in, rows, nullptr, projected);
      check(kernels::silu_mul_pairs(projected, rows, width, middle, stream_), "silu_mul_pairs");
    } else if (mlp.fused) {
      linears_->run(mlp.gate_up, in, rows, nullptr, projected);
      check(kernels::silu_mul_halves(projected, rows, width, middle, stream_), "silu_mul_halves");
    } else {
      linears_->run(mlp.gate, in, rows, nullptr, projected);
      linears_->run(mlp.up, in, rows, nullptr, projected + rows * width);
      check(kernels::silu_mul(projected, projected + rows * width, rows * width, middle, stream_),
            "silu_mul");
    }
    linears_->run(mlp.down, middle, rows, residual, out);
  }

  // Whether a MoE layer runs routed on the device (kernels/moe/moe_experts.h): its experts in
  // grouped tables, a router the device kernels take, and NIBBLE_MOE_HOST_ROUTING unset.
  bool routes_on_device(const cuda::DeviceLayer& w) const {
    const auto& c = m_.config;
    return !host_routing_ && w.expert_tables.grouped && c.num_experts <= kernels::kMoeMaxExperts &&
           c.num_experts_per_tok <= kernels::kMoeMaxTopK && c.num_experts_per_tok <= c.num_experts;
  }

  // x = x2 + experts(h): the router's FP32 scores, then routing, grouped expert GEMMs and the
  // weighted combine on the device (no synchronisation), or through the host.
  void experts(const cuda::DeviceLayer& w, std::int64_t T) {
    const auto& c = m_.config;
    kernels::MoeGroupedPlan plan =
        kernels::plan_moe_experts(T, c.num_experts, c.num_experts_per_tok);
    plan.fuse &= moe_fused_;
    plan.fuse_router &= moe_fused_router_;
    plan.router_form = moe_router_form_;
    plan.prefetch = moe_prefetch_;
    plan.route_in_gemm &= moe_route_in_gemm_;
    plan.one_launch &= moe_one_launch_;
    // A BF16 router runs inside the route at decode (moe_router_route) unless switched off.
    const bool router_fused =
        routes_on_device(w) && !w.router.nvfp4 && w.router.bias.empty() &&
        w.router.n == c.num_experts && w.router.k == c.hidden_size &&
        kernels::moe_router_fused(w.expert_tables.weights, plan, T, c.hidden_size, true);
    if (!router_fused)
      linears_->run_float(w.router, act_.h.get(), T, act_.router.get(), act_.scratch);
    if (!routes_on_device(w)) {
      experts_routed_on_host(w, T);
      return;
    }
    kernels::MoeExpertsArgs a;
    a.router_logits = act_.router.get();
    a.router_weight = router_fused ? w.router.dense.get() : nullptr;
    a.hidden = act_.h.get();
    a.residual = act_.x2.get();
    a.out = act_.x.get();
    a.tokens = T;
    a.experts = c.num_experts;
    a.k = c.num_experts_per_tok;
    a.hidden_size = c.hidden_size;
    a.norm_topk_prob = c.norm_topk_prob;
    a.routing_words = act_.moe_routing.get();
    a.arrivals = act_.moe_arrivals.get();
    a.routed = act_.routed.get();
    a.projected = act_.gate.get();
    a.middle = act_.up.get();
    a.expert_out = act_.expert_out.get();
    check(kernels::moe_experts(w.expert_tables.weights, a, plan, stream_), "moe_experts");
  }

  // The A/B and fallback path: the router's scores go to the host (moe_routing.h), one
  // synchronisation per MoE layer; each expert then runs over its slice of the gathered rows.
  void experts_routed_on_host(const cuda::DeviceLayer& w, std::int64_t T) {
    const auto& c = m_.config;
    const int E = c.num_experts, K = c.num_experts_per_tok, H = c.hidden_size;
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
    check(kernels::gather_rows(act_.h.get(), token, int(n), H, act_.routed.get(), stream_),
          "gather_rows");
    for (int e = 0; e < E; ++e) {
      const std::int64_t first = r.offsets[std::size_t(e)],
                         rows = r.offsets[std::size_t(e) + 1] - first;
      if (rows == 0) continue;
      swiglu(w.experts[std::size_t(e)], act_.routed.get() + first * H, rows, nullptr,
             act_.expert_out.get() + first * H, first);
    }
    check(kernels::combine_experts(act_.x2.get(), act_.expert_out.get(), source, weights, int(T), K,
                                   H, act_.x.get(), stream_),
          "combine_experts");
  }

  std::size_t free_at_start_ = 0;  // device memory free before this backend took any
  cudaStream_t stream_ = nullptr;
  cuda::DeviceModel m_;
  std::unique_ptr<cuda::LinearRunner> linears_;
  kernels::AttentionShape shape_;
  int rows_per_tile_ = 1;
  int sm_count_ = 0;
  DeviceBuffer<float> attention_work_;  // split-key partial softmaxes (decode steps)
  Activations act_;
  std::unique_ptr<cuda::StepTimer> timer_;
  PinnedBuffer<std::byte> staging_;
  DeviceBuffer<std::byte> step_;
  // Decode graphs (decode_graphs.h): on unless --enforce-eager or NIBBLE_CUDA_GRAPHS=0.
  bool graphs_enabled_ = true;
  bool kv_fp8_ = false;  // --kv-cache-dtype fp8 (caches created after the switch)
  // MoE routing: NIBBLE_MOE_HOST_ROUTING=1 forces the host path (A/B); moe_on_device_: every MoE
  // layer routes on the device (dense models too), the condition for decode graphs.
  bool host_routing_ = false;
  bool moe_fused_ = true, moe_fused_router_ = true;  // NIBBLE_MOE_FUSED, NIBBLE_MOE_FUSED_ROUTER
  kernels::MoeRouterForm moe_router_form_ = kernels::MoeRouterForm::kSpread;
  bool moe_prefetch_ = false;  // NIBBLE_MOE_PREFETCH=1
  bool moe_route_in_gemm_ = true;  // NIBBLE_MOE_ROUTE_IN_GEMM
  bool moe_one_launch_ = true;     // NIBBLE_MOE_ONE_LAUNCH
  bool moe_on_device_ = true;
  int graph_rows_ = 256;  // the largest bucket: --max-num-seqs once the engine says it
  std::vector<int> buckets_;
  cuda::DecodeStepOffsets graph_at_;
  DeviceBuffer<std::byte> graph_step_;  // the graphs' inputs, at fixed addresses
  std::vector<std::byte> graph_host_;
  std::uint64_t buffers_epoch_ = 0;  // bumped whenever a buffer graphs read is reallocated
  std::map<int, std::vector<int>> split_counts_;  // by bucket
  std::size_t graph_attention_floats_ = 0;        // the workspace every bucket's graphs need
  std::uint64_t graph_replays_ = 0;
  // Device sampling (device_sampler.h): on unless NIBBLE_DEVICE_SAMPLING=0.
  bool device_sampling_ = true;
  std::unique_ptr<cuda::DeviceSampler> sampler_;
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
