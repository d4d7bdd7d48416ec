#pragma once
// Decode steps as replays of captured CUDA graphs (decode_graphs.h): the batch-size buckets and
// the attention split counts each can take, the fixed-address inputs every graph reads
// (step_layout.h's decode offsets, with device sampling's inputs in the same blob), capture up
// front or on first use, and the launch of a step's replay. The backend runs every step this
// declines eagerly, and finishes a replayed one (host work, sampling after it, results).
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/device_kv_cache.h"
#include "engine/backend/cuda/device_sampler.h"
#include "engine/backend/cuda/forward_pass.h"
#include "engine/backend/cuda/step_buffers.h"
#include "engine/backend/cuda/step_layout.h"
#include "engine/backend/cuda/step_timer.h"

namespace nibble::backend::cuda {

class DecodeGraphRunner {
 public:
  // capturable: every step can be captured (no MoE layer routes through the host).
  DecodeGraphRunner(ForwardPass& forward, StepBuffers& buffers, DeviceSampler& sampler,
                    StepTimer& timer, cudaStream_t stream, int sm_count, bool enabled,
                    bool capturable, bool device_sampling);

  bool active() const { return enabled_ && capturable_; }
  void set_enabled(bool enabled) { enabled_ = enabled; }
  std::uint64_t replays() const { return replays_; }

  // The most decode rows the graphs serve (the engine's --max-num-seqs, times k + 1 verify rows
  // with speculative decoding); reserves every buffer the graphs read when they are on, so that
  // the KV cache is sized after them.
  void size_for(int max_rows);
  // Captures every bucket's graphs against `cache` (a progress line per bucket). On a failure
  // the graphs go off and the steps run eagerly.
  void prepare(DeviceKvCache& cache);

  // How a launched replay ends: its sampling already in the graph, to be enqueued after the
  // host work (the graph is forward-only because the host work writes the bitmasks), or none
  // (logits).
  enum class Sampling { kInGraph, kAfterHostWork, kNone };
  // Launches a decode step (every item one token, wanting a next token; a verify step's rows as
  // the backend expanded them) as its bucket's replay; nullopt, with nothing launched, when the
  // step must run eagerly (a prefill chunk, more rows than the largest bucket, hidden_in rows).
  // Items' hidden_out rows come back after the replay as after an eager step (the buffers they
  // are read from are the graphs' own, at fixed addresses). bitmasks_after:
  // the step's host work writes the items' bitmasks.
  std::optional<Sampling> launch(DeviceKvCache& cache, std::span<const BatchItem> items,
                                 bool bitmasks_after);
  // Enqueues the device sampling of a kAfterHostWork replay's real rows.
  void sample_after(std::span<const BatchItem> items);

 private:
  const std::vector<int>& split_counts(int rows);
  void reserve();
  StepInputs inputs() const;
  void upload(std::size_t bytes);
  std::size_t pack_sampling(std::span<const BatchItem> items, int rows, std::size_t bytes);
  void enqueue(DeviceKvCache& cache, const DecodeGraphKey& key);
  cudaGraphExec_t capture(DeviceKvCache& cache, const DecodeGraphKey& key);
  void turn_off(DeviceKvCache& cache, const char* what, const std::exception& e);

  ForwardPass& forward_;
  StepBuffers& buffers_;
  DeviceSampler& sampler_;
  StepTimer& timer_;
  cudaStream_t stream_;
  int sm_count_;
  bool enabled_, capturable_, device_sampling_;
  int max_rows_ = 256;  // the largest bucket: size_for's once the engine says it
  std::vector<int> buckets_;
  DecodeStepOffsets at_;
  DeviceBuffer<std::byte> inputs_;                // the graphs' inputs, at fixed addresses
  std::vector<std::byte> host_;                   // their host copy, packed per step
  std::map<int, std::vector<int>> split_counts_;  // by bucket
  std::size_t attention_floats_ = 0;              // the workspace every bucket's graphs need
  std::uint64_t replays_ = 0;
};

}  // namespace nibble::backend::cuda
