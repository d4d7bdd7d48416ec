#include "engine/backend/cuda/device_sampler.h"

#include <algorithm>
#include <cstring>

#include "kernels/sampling/sample_rows.h"

namespace nibble::backend::cuda {

using kernels::SampledRow;
using kernels::SamplingPenalty;
using kernels::SamplingRow;
using kernels::TopLogprob;

namespace {

constexpr std::size_t kTop = kernels::kMaxSampledTopLogprobs;

}  // namespace

std::size_t sampling_tail_words(std::span<const BatchItem> items, std::size_t bitmask_words) {
  std::size_t n = 0;
  for (const BatchItem& item : items)
    for (const DeviceSampling& s : samples_of(item)) {
      // + 1 each: a list starts 8-byte aligned.
      n += s.penalties.size() * (sizeof(SamplingPenalty) / 4) + 1;
      if (!s.bitmask.empty()) n += bitmask_words;
    }
  return n;
}

std::size_t pack_sampling(std::span<const BatchItem> items, int rows, std::size_t bitmask_words,
                          SamplingRow* params, std::uint32_t* tail, std::size_t start) {
  std::size_t used = start;
  int r = 0;
  for (const BatchItem& item : items)
    for (const DeviceSampling& s : samples_of(item)) {
      SamplingRow p = s.params;
      used += used % 2;  // penalty entries are 8 bytes
      p.penalty_offset = std::int32_t(used / 2);
      p.penalty_count = std::int32_t(s.penalties.size());
      if (!s.penalties.empty())
        std::memcpy(tail + used, s.penalties.data(), s.penalties.size_bytes());
      used += s.penalties.size() * 2;
      p.bitmask_offset = -1;
      if (!s.bitmask.empty()) {
        p.bitmask_offset = std::int32_t(used);
        std::memcpy(tail + used, s.bitmask.data(), bitmask_words * 4);
        used += bitmask_words;
      }
      params[r++] = p;
    }
  for (; r < rows; ++r) {  // padding rows: greedy, nothing else
    params[r] = SamplingRow{};
    params[r].temperature = 0.0f;
  }
  return used;
}

std::size_t DeviceSampler::params_bytes() const {
  return std::size_t(max_rows_) * sizeof(SamplingRow);
}

bool DeviceSampler::reserve(int rows, std::span<const BatchItem> items,
                            std::size_t penalty_entries) {
  const std::size_t tail = sampling_tail_words(items, words_);
  const bool fits = rows <= max_rows_ && tail <= tail_words_ && 2 * penalty_entries <= tail_words_;
  if (fits && !in_.empty()) return false;
  // Grow with room to spare: every growth costs the graphs a recapture.
  max_rows_ = std::max(max_rows_, rows);
  tail_words_ = std::max(
      {tail_words_, tail + tail / 2, 2 * penalty_entries, std::size_t(max_rows_) * words_ + 65536});
  const std::size_t bytes = params_bytes() + tail_words_ * 4;
  in_ = DeviceBuffer<std::byte>();
  in_host_ = PinnedBuffer<std::byte>();
  in_.ensure(bytes);
  in_host_.ensure(bytes);
  penalty_raw_ = DeviceBuffer<float>();
  penalty_raw_.ensure(tail_words_ / 2 + 1);
  const std::size_t out_bytes =
      std::size_t(max_rows_) * (sizeof(SampledRow) + kTop * sizeof(TopLogprob));
  out_ = DeviceBuffer<std::byte>();
  out_host_ = PinnedBuffer<std::byte>();
  out_.ensure(out_bytes);
  out_host_.ensure(out_bytes);
  return true;
}

void DeviceSampler::upload(std::span<const BatchItem> items, int rows, cudaStream_t stream) {
  const std::size_t used =
      pack_sampling(items, rows, words_, reinterpret_cast<SamplingRow*>(in_host_.get()),
                    reinterpret_cast<std::uint32_t*>(in_host_.get() + params_bytes()), 0);
  check(cudaMemcpyAsync(in_.get(), in_host_.get(), params_bytes() + used * 4,
                        cudaMemcpyHostToDevice, stream),
        "copying the sampling parameters");
}

void DeviceSampler::enqueue(float* logits, int rows, cudaStream_t stream) {
  enqueue(logits, rows, reinterpret_cast<const SamplingRow*>(in_.get()), in_.get() + params_bytes(),
          stream);
}

void DeviceSampler::enqueue(float* logits, int rows, const SamplingRow* params, const void* tail,
                            cudaStream_t stream) {
  kernels::SampleRowsArgs a;
  a.logits = logits;
  a.rows = rows;
  a.vocab = vocab_;
  a.params = params;
  a.penalties = static_cast<const SamplingPenalty*>(tail);
  a.penalty_raw = penalty_raw_.get();
  a.bitmask = static_cast<const std::uint32_t*>(tail);
  a.out = reinterpret_cast<SampledRow*>(out_.get());
  a.top = reinterpret_cast<TopLogprob*>(out_.get() + std::size_t(max_rows_) * sizeof(SampledRow));
  check(kernels::sample_rows(a, stream), "sample_rows");
  // Results, then the top logprobs of every row (256 B a row), in one copy: each copy is a
  // DMA round trip on the step's critical path. It takes the unused rows' results in between.
  const std::size_t top_at = std::size_t(max_rows_) * sizeof(SampledRow);
  check(cudaMemcpyAsync(out_host_.get(), out_.get(),
                        top_at + std::size_t(rows) * kTop * sizeof(TopLogprob),
                        cudaMemcpyDeviceToHost, stream),
        "copying sampled tokens and top logprobs");
}

void DeviceSampler::deliver(std::span<const BatchItem> items) const {
  const auto* out = reinterpret_cast<const SampledRow*>(out_host_.get());
  const auto* top = reinterpret_cast<const TopLogprob*>(out_host_.get() + std::size_t(max_rows_) *
                                                                              sizeof(SampledRow));
  std::size_t r = 0;
  for (const BatchItem& item : items)
    for (const DeviceSampling& s : samples_of(item)) {
      *s.result = out[r];
      std::copy_n(top + r * kTop, std::size_t(s.params.num_top_logprobs), s.top.begin());
      ++r;
    }
}

}  // namespace nibble::backend::cuda
