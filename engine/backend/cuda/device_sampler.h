#pragma once
// The CUDA backend's device sampling (BatchItem::sample): packs a step's sampling requests, runs
// kernels/sampling/sample_rows.h over the step's FP32 logits on the device, and brings back only
// the sampled tokens and their logprobs.
//
// Inputs: the rows' parameters (room for every row) at a fixed address, then the step's penalty
// lists and constrained rows' bitmasks packed one after another (the parameters hold their
// offsets). Eager steps keep them in the sampler's own buffer; a decode graph's step packs them
// into the graph's input blob (step_layout.h), so its one host-to-device copy carries them. The
// results come back in one device-to-host copy, inside the graph.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/device_buffer.h"

namespace nibble::backend::cuda {

// Words (4 bytes) the sampled items' penalty lists and bitmasks take when packed.
std::size_t sampling_tail_words(std::span<const BatchItem> items, std::size_t bitmask_words);

// Packs the sampled items' requests (samples_of: num_logits rows an item): row r's parameters
// (rows in item order, an item's in its order) to params[r], their
// penalty lists and bitmasks into tail from word `start` on (the parameters' offsets count words
// from tail[0]); rows up to `rows` (a graph's padding) sample greedily with nothing else. tail
// must hold start + sampling_tail_words(items) + 1 words. Returns the end word.
std::size_t pack_sampling(std::span<const BatchItem> items, int rows, std::size_t bitmask_words,
                          kernels::SamplingRow* params, std::uint32_t* tail, std::size_t start);

class DeviceSampler {
 public:
  explicit DeviceSampler(int vocab) : vocab_(vocab), words_((std::size_t(vocab) + 31) / 32) {}

  std::size_t bitmask_words() const { return words_; }

  // Room for steps of up to `rows` rows whose sampled items are `items`, and for penalty lists of
  // up to `penalty_entries` entries packed elsewhere (a decode graph's inputs); true when a buffer
  // was reallocated (graphs that captured the pass read the old one).
  bool reserve(int rows, std::span<const BatchItem> items, std::size_t penalty_entries = 0);
  // Packs the sampled items' requests into the sampler's own input buffer and copies it on
  // `stream` (eager steps). Call reserve first.
  void upload(std::span<const BatchItem> items, int rows, cudaStream_t stream);
  // Enqueues the pass over logits [rows, vocab] (modified: penalties are applied in place) and
  // the copy of its results to the host, reading the parameters from the sampler's own buffer,
  // or from `params` and `tail` (device addresses of pack_sampling's output, e.g. inside a decode
  // graph's inputs). No allocation, no synchronisation: capturable.
  void enqueue(float* logits, int rows, cudaStream_t stream);
  void enqueue(float* logits, int rows, const kernels::SamplingRow* params, const void* tail,
               cudaStream_t stream);
  // After the stream synchronised: each sampled item's result and top logprobs.
  void deliver(std::span<const BatchItem> items) const;

 private:
  std::size_t params_bytes() const;

  int vocab_;
  std::size_t words_;
  int max_rows_ = 0;
  std::size_t tail_words_ = 0;  // room for penalty lists and bitmasks, in 4-byte words
  DeviceBuffer<std::byte> in_;
  PinnedBuffer<std::byte> in_host_;
  DeviceBuffer<float> penalty_raw_;  // the listed tokens' raw logits (the kernel's scratch)
  DeviceBuffer<std::byte> out_;      // [max_rows] SampledRow, then [max_rows, 32] TopLogprob
  PinnedBuffer<std::byte> out_host_;
};

}  // namespace nibble::backend::cuda
