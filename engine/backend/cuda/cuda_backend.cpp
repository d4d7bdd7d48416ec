#include "engine/backend/cuda/cuda_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/batch_checks.h"
#include "engine/backend/cuda/decode_graph_runner.h"
#include "engine/backend/cuda/device_kv_cache.h"
#include "engine/backend/cuda/device_model.h"
#include "engine/backend/cuda/device_sampler.h"
#include "engine/backend/cuda/forward_pass.h"
#include "engine/backend/cuda/hidden_rows.h"
#include "engine/backend/cuda/kernel_shapes.h"
#include "engine/backend/cuda/moe_block.h"
#include "engine/backend/cuda/step_buffers.h"
#include "engine/backend/cuda/step_layout.h"
#include "engine/backend/cuda/step_timer.h"
#include "engine/backend/kv_layer_groups.h"
#include "engine/backend/linear_attention_shape.h"
#include "engine/backend/state_slot_positions.h"
#include "kernels/attention/paged_attention.h"

namespace nibble::backend {
namespace {

using cuda::check;
using cuda::DeviceKvCache;
using model::ModelConfig;
using bf16 = std::uint16_t;

constexpr std::int64_t kMaxSplitRows = 256;  // split-K workspace: rows of partial sums

bool samples_in(std::span<const BatchItem> items) {
  return std::any_of(items.begin(), items.end(),
                     [](const BatchItem& item) { return item.sample != nullptr; });
}
bool hidden_out_in(std::span<const BatchItem> items) {
  return std::any_of(items.begin(), items.end(),
                     [](const BatchItem& item) { return !item.hidden_out.empty(); });
}
bool bitmasks_in(std::span<const BatchItem> items) {
  return std::any_of(items.begin(), items.end(), [](const BatchItem& item) {
    return item.sample != nullptr && !item.sample->bitmask.empty();
  });
}

// Whether every MoE layer of the model routes on the device (dense models: trivially), the
// condition for decode graphs.
bool routes_on_device(const cuda::DeviceModel& m, const model::ModelDescription& d,
                      const cuda::MoeBlock& moe) {
  for (std::size_t l = 0; l < d.layers.size(); ++l) {
    const model::FfnSpec& ffn = d.layers[l].ffn;
    if (ffn.kind == model::FfnKind::kMoe && !moe.routes_on_device(m.layers[l], ffn.moe))
      return false;
  }
  return true;
}

// The largest decode-row count the graphs serve: every sequence's k + 1 verify rows, but no more
// graphs than 256 rows take unless --max-num-seqs asks for more (larger verify steps run
// eagerly, through the same decode attention).
int graph_rows(int max_sequences, int logits_per_sequence) {
  const std::int64_t rows = std::int64_t(max_sequences) * std::max(logits_per_sequence, 1);
  return int(std::min<std::int64_t>(rows, std::max(max_sequences, 256)));
}

int sm_count() {
  int device = 0, count = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
        "reading the SM count");
  return count;
}

// The Backend on one GPU, composed of its parts: the weights (device_model.h), the linears
// (device_linear.h), the MoE block (moe_block.h), the step's buffers (step_buffers.h), the
// forward pass (forward_pass.h), device sampling (device_sampler.h) and decode graphs
// (decode_graph_runner.h). This class sizes memory and runs steps: eagerly, or as replays.
class CudaBackend : public Backend {
 public:
  CudaBackend(model::ModelWeights weights, const CudaOptions& options) : options_(options) {
    cuda::refuse_shapes_beyond_kernels(weights.config);
    for (int l : weights.config.hidden_state_layers)
      if (l < 0 || l >= weights.config.num_layers)
        throw BackendError("cuda backend: hidden_state_layers names layer " + std::to_string(l) +
                           " of a model of " + std::to_string(weights.config.num_layers));
    check(cudaFree(nullptr), "creating the CUDA context");
    std::size_t total = 0;
    check(cudaMemGetInfo(&free_at_start_, &total), "cudaMemGetInfo");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    m_ = cuda::upload_model(std::move(weights));
    hybrid_ = m_.description.has_recurrent_state();
    groups_ = kv_layer_groups(m_.description);
    const auto& c = m_.config;
    linears_ = std::make_unique<cuda::LinearRunner>(stream_, kMaxSplitRows, m_.widest_nvfp4,
                                                    m_.largest_nvfp4, options_);
    timer_ = std::make_unique<cuda::StepTimer>(stream_, options_.step_timing);
    moe_ = std::make_unique<cuda::MoeBlock>(options_.moe, options_.layer, *linears_, stream_);
    sm_count_ = sm_count();
    forward_ = std::make_unique<cuda::ForwardPass>(m_, *linears_, *moe_, buffers_, *timer_, stream_,
                                                   sm_count_, options_);
    const bool capturable = routes_on_device(m_, forward_->description(), *moe_);
    if (c.num_experts > 0) {
      if (capturable) cuda::MoeBlock::prepare_device_routing();
      spdlog::info("cuda backend: MoE layers routed {}",
                   capturable                  ? "on the device (grouped experts)"
                   : options_.moe.host_routing ? "on the host (MoE host routing asked for)"
                                               : "on the host (experts not NVFP4 or MXFP4 "
                                                 "in one shape); no decode graphs");
      if (capturable)
        spdlog::info(
            "cuda backend: MoE decode fusions {}, router in the route {}, one token routed in "
            "the expert GEMMs {}, {}",
            options_.moe.fused ? "on" : "off",
            options_.moe.fused && options_.moe.fused_router ? "on (BF16 routers, <= 8 tokens)"
                                                            : "off",
            options_.moe.route_in_gemm ? "on" : "off",
            options_.moe.one_launch
                ? "gate_up and down in one launch where the device holds its blocks"
                : "gate_up and down in two launches");
    }
    sampler_ = std::make_unique<cuda::DeviceSampler>(c.vocab_size);
    graphs_ = std::make_unique<cuda::DecodeGraphRunner>(*forward_, buffers_, *sampler_, *timer_,
                                                        stream_, sm_count_, options_.graphs,
                                                        capturable, options_.device_sampling);
  }
  ~CudaBackend() override {
    timer_.reset();
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
  }

  std::string name() const override { return "cuda"; }
  // hidden_out for every model (the last layer's output, or hidden_state_layers' inputs); hidden_in
  // for an MTP module and an EAGLE-3 head.
  bool returns_hidden_states() const override { return true; }
  const ModelConfig& config() const override { return m_.config; }

  // BF16, or FP8 E4M3 with a BF16 scale per (token, KV head) row: 2 * D + 2 bytes of keys and
  // values per row instead of 4 * D; attention layers only (a hybrid model's linear-attention
  // layers keep state slots instead), one block group's (kv_layer_groups.h: gpt-oss's full and
  // sliding layers each hold blocks of their own).
  std::size_t kv_block_bytes(int block_size) const override {
    const auto& c = m_.config;
    const std::size_t rows = std::size_t(block_size) * std::size_t(c.num_kv_heads);
    const std::size_t per_row = kv_fp8_ ? 2 * std::size_t(c.head_dim) + 2 * sizeof(bf16)
                                        : 2 * std::size_t(c.head_dim) * sizeof(bf16);
    return std::size_t(groups_.layers_per_block) * rows * per_row;
  }
  // The sliding group's window (gpt-oss: 128), so that the engine frees its blocks as they leave
  // it; 0 for models with one group.
  int kv_sliding_window() const override { return groups_.sliding_window; }

  // FP32 conv windows and delta-rule states, as the CPU backend keeps them (the kernel's slot).
  std::size_t state_slot_bytes() const override {
    return state_slot_floats(m_.description) * sizeof(float);
  }

  bool set_kv_cache_dtype(KvCacheDtype dtype) override {
    if (dtype == KvCacheDtype::kFp8 &&
        !kernels::paged_attention_fp8_supported(forward_->attention_shape()))
      return false;
    kv_fp8_ = dtype == KvCacheDtype::kFp8;
    return true;
  }
  std::string kv_cache_dtype() const override { return kv_fp8_ ? "fp8" : "bf16"; }

  std::unique_ptr<KvCache> new_kv_cache(int num_blocks, int block_size) override {
    return new_kv_cache_with_state(num_blocks, block_size, 0);
  }

  std::unique_ptr<KvCache> new_kv_cache_with_state(int num_blocks, int block_size,
                                                   int state_slots) override {
    if (num_blocks < 1 || block_size < 1)
      throw BackendError("cuda backend: a KV cache needs at least one block of one position");
    if (state_slots < 0 || (state_slots > 0 && !hybrid_))
      throw BackendError("cuda backend: " + m_.config.architecture + " keeps no recurrent state; " +
                         std::to_string(state_slots) + " state slots asked for");
    auto cache = std::make_unique<DeviceKvCache>(m_.config, m_.description, num_blocks, block_size,
                                                 kv_fp8_, state_slots, snapshots_per_slot_, this);
    if (cache->snapshot_bytes() > 0)
      spdlog::info(
          "cuda backend: {} state slots keep {} snapshots each for speculative rollback "
          "({:.2f} MiB)",
          state_slots, cache->max_snapshots, double(cache->snapshot_bytes()) / double(1 << 20));
    return cache;
  }

  // vLLM's meaning of --gpu-memory-utilization: the share of the device THIS engine may take
  // (weights, activations, KV cache), so that engines sharing a GPU can split it; never more than
  // is free now, less a margin for cuBLAS and the allocator. The decode graphs' buffers are
  // taken here too, before the KV cache is sized.
  std::size_t device_memory_for_kv(double utilization, int max_tokens, int max_sequences,
                                   int logits_per_sequence) override {
    buffers_.reserve(m_.config, max_tokens,
                     cuda::max_logit_rows(max_tokens, max_sequences, logits_per_sequence), 0);
    // A hybrid model verifying k drafts keeps k + 1 state snapshots a slot: the caller counts
    // their bytes in the budget (serve: the kept states), the caches made from now on hold them.
    snapshots_per_slot_ = hybrid_ && logits_per_sequence > 1 ? logits_per_sequence : 0;
    if (snapshots_per_slot_ > 0)
      spdlog::info(
          "cuda backend: speculative rollback keeps {} state snapshots a slot ({:.2f} MiB a slot)",
          snapshots_per_slot_,
          double(std::size_t(snapshots_per_slot_) * state_slot_bytes()) / double(1 << 20));
    // Hybrid models' verify steps run eagerly: their graphs stay one row a sequence.
    graphs_->size_for(hybrid_ ? max_sequences : graph_rows(max_sequences, logits_per_sequence));
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

  // A verify step (a decode row and its k drafts as one chunk, BatchItem::num_logits k + 1) runs
  // as k + 1 decode rows (step_layout.h verify_rows_as_decodes): a replay of the decode graph of
  // its row count, sampling every row on the device, or eagerly through the same decode
  // attention; the engine loop verifies the sampled tokens (engine/spec/verify.h). A step that
  // mixes verify items with a prefill chunk runs eagerly as a chunked step. Hybrid models' verify
  // items stay chunks (their recurrent state runs token by token), run eagerly, and snapshot
  // each row's state after each token (device_kv_cache.h): the slot's next step rolls back to
  // the accepted position's.
  bool logits_at_several_positions() const override { return true; }
  bool samples_on_device() const override { return options_.device_sampling; }
  void set_decode_graphs(bool enabled) override { graphs_->set_enabled(enabled); }
  std::uint64_t decode_graph_replays() const override { return graphs_->replays(); }

  // Captures every bucket's graphs for `kv` up front, so that no serving step pays for a
  // capture.
  void prepare_decode(KvCache& kv) override { graphs_->prepare(own_cache(kv)); }

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
    DeviceKvCache& cache = own_cache(kv);
    const auto& c = m_.config;
    const std::int64_t T = check_batch(c, "cuda", cache, items, options_.device_sampling,
                                       /*several_logits=*/true, /*hidden_states=*/true);
    check_state_slots("cuda", cache, items, hybrid_);
    // Device sampling draws over the target's vocabulary; an EAGLE-3 head's logits are over its
    // own (the drafter reads them).
    if (c.eagle3 && samples_in(items))
      throw BackendError("cuda backend: an EAGLE-3 head's logits are not sampled on the device");
    if (cache.blocks * std::int64_t(cache.block) > INT32_MAX)
      throw BackendError("cuda backend: a KV cache of more than 2^31 positions");
    const int snapshots = prepare_state_slots(cache, items);
    if (T == 0) {
      if (host_work != nullptr) (*host_work)();
      return;
    }
    // Verify items as decode rows, from here on the step's items (graph or eager).
    if (cuda::verify_rows_as_decodes(items, verify_rows_)) items = verify_rows_;
    if (const auto replay =
            graphs_->launch(cache, items, host_work != nullptr && bitmasks_in(items))) {
      using Sampling = cuda::DecodeGraphRunner::Sampling;
      hidden_to_host(items, std::int64_t(items.size()));
      run_host_work(host_work);
      if (*replay == Sampling::kAfterHostWork) graphs_->sample_after(items);
      finish(items, *replay != Sampling::kNone, true, std::int64_t(items.size()));
      return;
    }

    const cuda::StepLayout layout =
        cuda::layout_step(items, cache.block, forward_->rows_per_tile());
    const cuda::PackedStep packed = cuda::pack_step(layout);
    const auto R = std::int64_t(layout.logit_rows.size());
    const int num_tiles = int(layout.tiles.size());
    const int max_position = *std::max_element(layout.positions.begin(), layout.positions.end());
    // One tile per row: a step of decodes (the decode kernel's own split rule).
    const auto& shape = forward_->attention_shape();
    const int splits =
        num_tiles == T ? kernels::paged_decode_splits(shape, int(T), max_position, sm_count_, -1,
                                                      -1, forward_->attention_options())
                       : kernels::paged_attention_splits(shape, num_tiles, max_position, sm_count_);
    buffers_.reserve(c, T, R, kernels::paged_attention_workspace_floats(shape, int(T), splits));
    buffers_.staging.ensure(packed.bytes.size());
    buffers_.step.ensure(packed.bytes.size());
    std::copy(packed.bytes.begin(), packed.bytes.end(), buffers_.staging.get());
    check(cudaMemcpyAsync(buffers_.step.get(), buffers_.staging.get(), packed.bytes.size(),
                          cudaMemcpyHostToDevice, stream_),
          "copying the step's layout");
    cuda::StepInputs in = cuda::step_inputs_at(buffers_.step.get(), packed);
    in.hidden_in_runs = hidden_in_to_device(items);
    in.num_state_rows = int(layout.state_rows.size());
    in.snapshots = snapshots > 0;
    for (const kernels::GatedDeltaNetRow& row : layout.state_rows)
      in.longest_state_row = std::max(in.longest_state_row, int(row.count));
    in.decode_tiles =
        int(std::count_if(layout.tiles.begin(), layout.tiles.end(),
                          [](const kernels::AttentionTile& t) { return t.rows == 1; }));
    timer_->mark("start");
    forward_->enqueue(cache, in, {T, R, num_tiles, splits, true});
    hidden_to_host(items, T);
    run_host_work(host_work);
    const bool sampled = R > 0 && samples_in(items);
    if (sampled) {
      if (sampler_->reserve(int(R), items)) ++buffers_.epoch;
      sampler_->upload(items, int(R), stream_);
      sampler_->enqueue(buffers_.act.logits.get(), int(R), stream_);
      timer_->mark("sampling");
    }
    finish(items, sampled, R > 0, T);
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

  // Waits for the step and hands its results to the items: sampled tokens, or the logits of
  // the rows that want them (`logits`).
  void finish(std::span<const BatchItem> items, bool sampled, bool logits, std::int64_t tokens) {
    if (sampled) {
      check(cudaStreamSynchronize(stream_), "running the step");
      sampler_->deliver(items);
    } else if (logits) {
      logits_to_host(items);
    }
    check(cudaStreamSynchronize(stream_), "running the step");
    deliver_hidden(items);
    timer_->end_step(long(tokens));
  }

  // An MTP module's or EAGLE-3 head's step: the items' hidden_in rows, in item order, as BF16
  // into act.hidden_in (through pinned memory, on the step's stream; the step's activations
  // already reserved). Returns the runs of rows of one width (an EAGLE-3 head's items bring the
  // target's or its own; an MTP module's are all H wide).
  std::span<const cuda::HiddenInRun> hidden_in_to_device(std::span<const BatchItem> items) {
    hidden_in_runs_.clear();
    if (!m_.config.mtp_module && !m_.config.eagle3) return {};
    const std::size_t n = cuda::hidden_in_elements(items);
    hidden_in_host_.ensure(n);
    hidden_in_runs_ = cuda::pack_hidden_in(items, hidden_in_host_.get());
    check(cudaMemcpyAsync(buffers_.act.hidden_in.get(), hidden_in_host_.get(), n * 2,
                          cudaMemcpyHostToDevice, stream_),
          "copying the hidden states in");
    return hidden_in_runs_;
  }

  // Where some item wants hidden_out: the step's first `rows` rows of its hidden states, in one
  // copy into pinned memory on the step's stream (deliver_hidden hands them out after the sync).
  // They are act.kept for a model with hidden_state_layers (keep_hidden_state), act.h for an MTP
  // module (after its final norm: logits()), else act.x, the last layer's output: buffers that
  // decode graphs also write, so a replay's rows come back the same way.
  void hidden_to_host(std::span<const BatchItem> items, std::int64_t rows) {
    hidden_rows_ = 0;
    if (!hidden_out_in(items)) return;
    const auto& c = m_.config;
    const std::uint16_t* from = !c.hidden_state_layers.empty() ? buffers_.act.kept.get()
                                : c.mtp_module                 ? buffers_.act.h.get()
                                                               : buffers_.act.x.get();
    const std::size_t n = std::size_t(rows) * std::size_t(c.hidden_state_width());
    hidden_host_.ensure(n);
    check(cudaMemcpyAsync(hidden_host_.get(), from, n * 2, cudaMemcpyDeviceToHost, stream_),
          "copying the hidden states out");
    hidden_rows_ = rows;
  }

  // After the step's sync: each item's rows of hidden_to_host's copy, as floats, into its
  // hidden_out (items' rows in item order, as the step laid them out).
  void deliver_hidden(std::span<const BatchItem> items) {
    if (hidden_rows_ == 0) return;
    cuda::scatter_hidden_out(items, hidden_host_.get(),
                             std::size_t(m_.config.hidden_state_width()));
    hidden_rows_ = 0;
  }

  // Copies the logits of the step's sampled rows (the first R of act.logits: each item's
  // num_logits rows in turn, step_layout.h) into the items' buffers; synchronises the stream.
  void logits_to_host(std::span<const BatchItem> items) {
    const std::size_t V = std::size_t(m_.config.logits_size());  // an EAGLE-3 head's: its own
    std::size_t R = 0;
    for (const BatchItem& item : items) R += item.logits.empty() ? 0 : std::size_t(item.num_logits);
    logits_host_.ensure(R * V);
    check(cudaMemcpyAsync(logits_host_.get(), buffers_.act.logits.get(), R * V * 4,
                          cudaMemcpyDeviceToHost, stream_),
          "copying logits");
    check(cudaStreamSynchronize(stream_), "running the step");
    timer_->mark("logits to host");
    std::size_t r = 0;
    for (const BatchItem& item : items) {
      if (item.logits.empty()) continue;
      std::copy_n(logits_host_.get() + r * V, item.logits.size(), item.logits.begin());
      r += std::size_t(item.num_logits);
    }
  }

  // Before a step, enqueued ahead of it (graph replay or eager): every item of a state slot
  // starts at 0 (its state zeroed: a new sequence, or one recomputed after a preemption), where
  // the slot's state is, or at a position its last verify step snapshotted (that snapshot copied
  // over the live state: the rollback past rejected drafts); std::logic_error otherwise, as the
  // CPU backend's, before anything changes. Returns the most tokens a verify row of the step
  // snapshots (0: none), the snapshot area grown to hold them.
  int prepare_state_slots(DeviceKvCache& cache, std::span<const BatchItem> items) {
    const std::vector<StateSlotPositions::Restore> restores =
        cache.positions.prepare("cuda", items);
    int snapshots = 0;
    for (const BatchItem& item : items)
      if (item.state_slot >= 0 && StateSlotPositions::keeps_states(item))
        snapshots = std::max(snapshots, int(item.tokens.size()));
    if (cache.ensure_snapshots(snapshots, stream_))
      spdlog::info("cuda backend: state snapshots grown to {} a slot ({:.2f} MiB)",
                   cache.max_snapshots, double(cache.snapshot_bytes()) / double(1 << 20));
    for (const StateSlotPositions::Restore& r : restores)
      cache.restore_state_slot(r.slot, r.snapshot, stream_);
    for (const BatchItem& item : items)
      if (item.state_slot >= 0 && item.start == 0) cache.zero_state_slot(item.state_slot, stream_);
    cache.positions.advance(items);
    return snapshots;
  }

  DeviceKvCache& own_cache(KvCache& kv) const {
    auto* cache = dynamic_cast<DeviceKvCache*>(&kv);
    if (!cache || cache->owner != this)
      throw BackendError("cuda backend: KV cache belongs to another backend");
    return *cache;
  }

  CudaOptions options_;
  std::size_t free_at_start_ = 0;  // device memory free before this backend took any
  cudaStream_t stream_ = nullptr;
  cuda::DeviceModel m_;
  int sm_count_ = 0;
  bool kv_fp8_ = false;         // --kv-cache-dtype fp8 (caches created after the switch)
  bool hybrid_ = false;         // the model keeps recurrent state (state slots)
  int snapshots_per_slot_ = 0;  // state snapshots a cache's slot keeps (k + 1 verifying k drafts)
  KvLayerGroups groups_;        // the cache's block groups (DeviceKvCache computes the same)
  std::unique_ptr<cuda::LinearRunner> linears_;
  std::unique_ptr<cuda::StepTimer> timer_;
  std::unique_ptr<cuda::MoeBlock> moe_;
  cuda::StepBuffers buffers_;
  std::unique_ptr<cuda::ForwardPass> forward_;
  std::unique_ptr<cuda::DeviceSampler> sampler_;
  std::unique_ptr<cuda::DecodeGraphRunner> graphs_;
  cuda::PinnedBuffer<float> logits_host_;
  cuda::PinnedBuffer<std::uint16_t> hidden_host_, hidden_in_host_;  // BF16 rows (hidden states)
  std::int64_t hidden_rows_ = 0;  // rows hidden_to_host copied for deliver_hidden, 0: none
  std::vector<cuda::HiddenInRun> hidden_in_runs_;  // the step's (hidden_in_to_device)
  std::vector<BatchItem> verify_rows_;             // the step's verify items as decode rows
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

std::unique_ptr<Backend> make_cuda_backend(model::ModelWeights weights,
                                           const CudaOptions& options) {
  std::string why;
  if (!cuda_device_available(&why)) throw BackendError("cuda backend: " + why);
  cudaDeviceProp prop{};
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  spdlog::info("cuda backend: {} (sm_{}{}, {} SMs, {} MiB)", prop.name, prop.major, prop.minor,
               prop.multiProcessorCount, prop.totalGlobalMem >> 20);
  return std::make_unique<CudaBackend>(std::move(weights), options);
}

}  // namespace nibble::backend
