#pragma once
// The CUDA backend's device sampling (BatchItem::sample): packs a step's sampling requests, runs
// kernels/sampling/sample_rows.h over the step's FP32 logits on the device, and brings back only
// the sampled tokens and their logprobs.
//
// Inputs live in one device buffer at addresses fixed until it grows, so a decode graph can
// capture the pass: the rows' parameters first (room for max_rows), then the step's penalty lists
// and constrained rows' bitmasks packed one after another (the parameters hold their offsets).
// One host-to-device copy per step writes them; one device-to-host copy returns the results.
#include <cuda_runtime.h>

#include <cstddef>
#include <span>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/device_buffer.h"

namespace nibble::backend::cuda {

class DeviceSampler {
 public:
  explicit DeviceSampler(int vocab) : vocab_(vocab), words_((std::size_t(vocab) + 31) / 32) {}

  // Room for steps of up to `rows` rows whose sampled items are `items`; true when a buffer was
  // reallocated (graphs that captured the pass read the old one).
  bool reserve(int rows, std::span<const BatchItem> items);
  // Packs the sampled items' requests (rows in item order) and copies them on `stream`; rows up
  // to `rows` (a graph's padding) sample greedily with nothing else. Call reserve first.
  void upload(std::span<const BatchItem> items, int rows, cudaStream_t stream);
  // Enqueues the pass over logits [rows, vocab] (modified: penalties are applied in place) and
  // the copy of its results to the host. No allocation, no synchronisation: capturable.
  void enqueue(float* logits, int rows, cudaStream_t stream);
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
  std::size_t upload_bytes_ = 0;
  DeviceBuffer<float> penalty_raw_;  // the listed tokens' raw logits (the kernel's scratch)
  DeviceBuffer<std::byte> out_;      // [max_rows] SampledRow, then [max_rows, 32] TopLogprob
  PinnedBuffer<std::byte> out_host_;
};

}  // namespace nibble::backend::cuda
