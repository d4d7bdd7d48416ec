#include "engine/backend/cuda/decode_graph_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace nibble::backend::cuda {
namespace {

// The smallest block size the graphs' block-table room is sized for (the engine's is 16).
constexpr int kTableBlockSize = 16;

// Where a decode step's padding rows keep their recurrent state: the cache's scratch slot, or -1
// for models without state slots.
int scratch_state_slot(const DeviceKvCache& cache) {
  return cache.num_state_slots() > 0 ? cache.scratch_state_slot() : -1;
}

bool samples_in(std::span<const BatchItem> items) {
  return std::any_of(items.begin(), items.end(),
                     [](const BatchItem& item) { return item.sample != nullptr; });
}

}  // namespace

DecodeGraphRunner::DecodeGraphRunner(ForwardPass& forward, StepBuffers& buffers,
                                     DeviceSampler& sampler, StepTimer& timer, cudaStream_t stream,
                                     int sm_count, bool enabled, bool capturable,
                                     bool device_sampling)
    : forward_(forward),
      buffers_(buffers),
      sampler_(sampler),
      timer_(timer),
      stream_(stream),
      sm_count_(sm_count),
      enabled_(enabled),
      capturable_(capturable),
      device_sampling_(device_sampling) {}

void DecodeGraphRunner::size_for(int max_rows) {
  if (max_rows >= 1 && max_rows != max_rows_) {
    max_rows_ = max_rows;
    buckets_ = decode_buckets(max_rows_);
    attention_floats_ = 0;
    inputs_ = {};
  }
  if (enabled_) reserve();
}

// The split counts a decode step of `rows` sequences can take at any context length: every
// power of two up to the longest context's (paged_decode_splits' contract).
const std::vector<int>& DecodeGraphRunner::split_counts(int rows) {
  auto [it, inserted] = split_counts_.try_emplace(rows);
  if (inserted) {
    const int most = kernels::paged_decode_splits(forward_.attention_shape(), rows,
                                                  std::max(forward_.config().max_context - 1, 0),
                                                  sm_count_, -1, -1, forward_.attention_options());
    for (int splits = 1; splits <= most; splits *= 2) it->second.push_back(splits);
  }
  return it->second;
}

// Buffers every bucket's graphs read: activations for the largest bucket, the attention
// workspace for its most split step, and the fixed-address step inputs. Sized once; cheap on
// every later step.
void DecodeGraphRunner::reserve() {
  if (buckets_.empty()) buckets_ = decode_buckets(max_rows_);
  if (attention_floats_ == 0) {
    for (int rows : buckets_)
      for (int splits : split_counts(rows))
        attention_floats_ = std::max(
            attention_floats_,
            kernels::paged_attention_workspace_floats(forward_.attention_shape(), rows, splits));
    attention_floats_ = std::max<std::size_t>(attention_floats_, 1);
  }
  buffers_.reserve(forward_.config(), max_rows_, max_rows_, attention_floats_);
  // Device sampling's inputs ride in the same blob: room for a bitmask on every row and 4 MiB
  // of penalty lists; a step that needs more samples eagerly.
  const std::size_t sampling_room =
      device_sampling_ ? std::size_t(max_rows_) * (sampler_.bitmask_words() + 2) * 4 + (4 << 20)
                       : 0;
  if (sampler_.reserve(max_rows_, {}, sampling_room / 8)) ++buffers_.epoch;
  if (!inputs_.empty()) return;
  at_ = decode_step_offsets(max_rows_);
  // Block tables: the scratch table plus a table covering the whole context per sequence.
  // Each row's block table and, with a sliding block group, its window table.
  const std::size_t per_row =
      std::size_t((forward_.config().max_context + kTableBlockSize - 1) / kTableBlockSize) *
      (forward_.sliding_window() > 0 ? 2 : 1);
  const std::size_t tables = 1 + std::size_t(max_rows_) * per_row;
  const std::size_t bytes = at_.block_tables + tables * 4 + sampling_room;
  inputs_.ensure(bytes);
  buffers_.staging.ensure(bytes);
  ++buffers_.epoch;
}

StepInputs DecodeGraphRunner::inputs() const {
  return step_inputs_at(inputs_.get(), at_);
}

void DecodeGraphRunner::upload(std::size_t bytes) {
  std::copy_n(host_.begin(), bytes, buffers_.staging.get());
  check(cudaMemcpyAsync(inputs_.get(), buffers_.staging.get(), bytes, cudaMemcpyHostToDevice,
                        stream_),
        "copying the decode step's inputs");
}

// Appends the step's device sampling requests to the graph inputs (host_, packed up to
// `bytes`): parameters at at_.sampling, lists and bitmasks after the block tables. Returns the
// bytes to copy.
std::size_t DecodeGraphRunner::pack_sampling(std::span<const BatchItem> items, int rows,
                                             std::size_t bytes) {
  const std::size_t words = sampler_.bitmask_words();
  const std::size_t start = ((bytes - at_.block_tables) / 4 + 1) / 2 * 2;
  const std::size_t room = at_.block_tables + (start + sampling_tail_words(items, words) + 1) * 4;
  if (host_.size() < room) host_.resize(room);
  const std::size_t end = cuda::pack_sampling(
      items, rows, words, reinterpret_cast<kernels::SamplingRow*>(host_.data() + at_.sampling),
      reinterpret_cast<std::uint32_t*>(host_.data() + at_.block_tables), start);
  return at_.block_tables + end * 4;
}

// The forward pass of key.rows padded decode rows over the graph inputs, and the sampling pass
// over those rows (reading pack_sampling's inputs) when key.sampled.
void DecodeGraphRunner::enqueue(DeviceKvCache& cache, const DecodeGraphKey& key) {
  StepInputs in = inputs();
  in.num_state_rows = cache.num_state_slots() > 0 ? key.rows : 0;
  forward_.enqueue(cache, in, {key.rows, key.rows, key.rows, key.splits, false});
  if (key.sampled)
    sampler_.enqueue(buffers_.act.logits.get(), key.rows,
                     reinterpret_cast<const kernels::SamplingRow*>(inputs_.get() + at_.sampling),
                     inputs_.get() + at_.block_tables, stream_);
}

cudaGraphExec_t DecodeGraphRunner::capture(DeviceKvCache& cache, const DecodeGraphKey& key) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
        "starting a decode graph capture");
  try {
    enqueue(cache, key);
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
  cache.graphs.store(key, exec, buffers_.epoch);
  return exec;
}

void DecodeGraphRunner::turn_off(DeviceKvCache& cache, const char* what, const std::exception& e) {
  spdlog::warn("cuda backend: decode graphs off, {}: {}", what, e.what());
  enabled_ = false;
  cache.graphs.clear();
}

void DecodeGraphRunner::prepare(DeviceKvCache& cache) {
  if (!active()) return;
  reserve();
  std::size_t free_before = 0, free_after = 0, total = 0;
  check(cudaMemGetInfo(&free_before, &total), "cudaMemGetInfo");
  const auto start = std::chrono::steady_clock::now();
  std::size_t captured = 0;
  try {
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      const int rows = buckets_[i];
      for (int splits : split_counts(rows)) {
        const DecodeGraphKey key{rows, splits, device_sampling_};
        if (cache.graphs.find(key, buffers_.epoch) != nullptr) continue;
        // One eager run first: whatever a kernel or cuBLAS sets up on first use happens
        // outside the capture. Padding rows only: nothing but the scratch block is written.
        std::size_t bytes = pack_decode_step({}, cache.block, rows, cache.scratch_block(), at_,
                                             host_, scratch_state_slot(cache));
        if (key.sampled) bytes = pack_sampling({}, rows, bytes);
        upload(bytes);
        enqueue(cache, key);
        check(cudaStreamSynchronize(stream_), "warming up a decode bucket");
        capture(cache, key);
        ++captured;
      }
      spdlog::info("cuda backend: captured decode graphs for batch size {} ({}/{} buckets)", rows,
                   i + 1, buckets_.size());
    }
  } catch (const BackendError& e) {
    turn_off(cache, "capturing failed", e);
    return;
  }
  check(cudaMemGetInfo(&free_after, &total), "cudaMemGetInfo");
  spdlog::info("cuda backend: {} decode graphs for batch sizes 1..{} in {:.2f} s, {} MiB", captured,
               max_rows_,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
               (free_before > free_after ? free_before - free_after : 0) >> 20);
}

// A step of decodes only (one token a row, each wanting a next token) replays its bucket's graph.
// Speculative verify steps arrive here as decode rows already (the backend expands each item's
// last token and k drafts into k + 1 rows of one sequence: step_layout.h
// verify_rows_as_decodes), so they replay the same graphs. With host work that writes bitmasks
// (structured outputs, overlapped) the replay is of the forward-only graph and the sampling pass
// comes after the host work: a sampled graph would read the bitmasks before they are written.
std::optional<DecodeGraphRunner::Sampling> DecodeGraphRunner::launch(
    DeviceKvCache& cache, std::span<const BatchItem> items, bool bitmasks_after) {
  if (!active()) return std::nullopt;
  int max_position = 0;
  for (const BatchItem& item : items) {
    // hidden_in (an MTP module's step) is an input the graphs do not read: eagerly.
    if (item.tokens.size() != 1 || !wants_next_token(item) || !item.hidden_in.empty())
      return std::nullopt;
    max_position = std::max(max_position, item.start);
  }
  const bool sampled = samples_in(items);
  const bool after = sampled && bitmasks_after;
  if (buckets_.empty()) buckets_ = decode_buckets(max_rows_);
  const int rows = decode_bucket_for(int(items.size()), buckets_);
  if (rows == 0) return std::nullopt;
  const DecodeGraphKey key{
      rows,
      kernels::paged_decode_splits(forward_.attention_shape(), rows, max_position, sm_count_, -1,
                                   -1, forward_.attention_options()),
      sampled && !after};
  try {
    reserve();
    // Before the graph is looked up: a sampler buffer that grows retires the graphs.
    if (after && sampler_.reserve(int(items.size()), items)) ++buffers_.epoch;
    std::size_t bytes = pack_decode_step(items, cache.block, rows, cache.scratch_block(), at_,
                                         host_, scratch_state_slot(cache));
    if (key.sampled) bytes = pack_sampling(items, rows, bytes);
    if (bytes > inputs_.size()) return std::nullopt;
    cudaGraphExec_t exec = cache.graphs.find(key, buffers_.epoch);
    if (exec == nullptr) exec = capture(cache, key);
    upload(bytes);
    timer_.mark("start");
    check(cudaGraphLaunch(exec, stream_), "replaying a decode graph");
    ++replays_;
    timer_.mark("decode graph");
  } catch (const BackendError& e) {
    turn_off(cache, "running eagerly", e);
    return std::nullopt;
  }
  return key.sampled ? Sampling::kInGraph : after ? Sampling::kAfterHostWork : Sampling::kNone;
}

void DecodeGraphRunner::sample_after(std::span<const BatchItem> items) {
  // The real rows only: they come first in the graph's logits, in item order.
  sampler_.upload(items, int(items.size()), stream_);
  sampler_.enqueue(buffers_.act.logits.get(), int(items.size()), stream_);
  timer_.mark("sampling");
}

}  // namespace nibble::backend::cuda
