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

// Words the step's penalty lists and bitmasks take.
std::size_t tail_words_for(std::span<const BatchItem> items, std::size_t words) {
  std::size_t n = 0;
  for (const BatchItem& item : items) {
    if (item.sample == nullptr) continue;
    n += item.sample->penalties.size() * (sizeof(SamplingPenalty) / 4);
    if (!item.sample->bitmask.empty()) n += words + 1;  // + 1: the next list starts 8-aligned
  }
  return n;
}

}  // namespace

std::size_t DeviceSampler::params_bytes() const {
  return std::size_t(max_rows_) * sizeof(SamplingRow);
}

bool DeviceSampler::reserve(int rows, std::span<const BatchItem> items) {
  const std::size_t tail = tail_words_for(items, words_);
  if (rows <= max_rows_ && tail <= tail_words_ && !in_.empty()) return false;
  // Grow with room to spare: every growth costs the graphs a recapture.
  max_rows_ = std::max(max_rows_, rows);
  tail_words_ = std::max({tail_words_, tail + tail / 2, std::size_t(max_rows_) * words_ + 65536});
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
  auto* params = reinterpret_cast<SamplingRow*>(in_host_.get());
  auto* tail = reinterpret_cast<std::uint32_t*>(in_host_.get() + params_bytes());
  std::size_t used = 0;  // words of the tail
  int r = 0;
  for (const BatchItem& item : items) {
    if (item.sample == nullptr) continue;
    const DeviceSampling& s = *item.sample;
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
      std::memcpy(tail + used, s.bitmask.data(), s.bitmask.size_bytes());
      used += words_;
    }
    params[r++] = p;
  }
  for (; r < rows; ++r) {  // padding rows: greedy, nothing else
    params[r] = SamplingRow{};
    params[r].temperature = 0.0f;
  }
  upload_bytes_ = params_bytes() + used * 4;
  check(cudaMemcpyAsync(in_.get(), in_host_.get(), upload_bytes_, cudaMemcpyHostToDevice, stream),
        "copying the sampling parameters");
}

void DeviceSampler::enqueue(float* logits, int rows, cudaStream_t stream) {
  kernels::SampleRowsArgs a;
  a.logits = logits;
  a.rows = rows;
  a.vocab = vocab_;
  a.params = reinterpret_cast<const SamplingRow*>(in_.get());
  a.penalties = reinterpret_cast<const SamplingPenalty*>(in_.get() + params_bytes());
  a.penalty_raw = penalty_raw_.get();
  a.bitmask = reinterpret_cast<const std::uint32_t*>(in_.get() + params_bytes());
  a.out = reinterpret_cast<SampledRow*>(out_.get());
  a.top = reinterpret_cast<TopLogprob*>(out_.get() + std::size_t(max_rows_) * sizeof(SampledRow));
  check(kernels::sample_rows(a, stream), "sample_rows");
  // Results, then the top logprobs of the rows that ask (all rows: one copy, 8 + 256 B a row).
  check(cudaMemcpyAsync(out_host_.get(), out_.get(), std::size_t(rows) * sizeof(SampledRow),
                        cudaMemcpyDeviceToHost, stream),
        "copying sampled tokens");
  const std::size_t top_at = std::size_t(max_rows_) * sizeof(SampledRow);
  check(cudaMemcpyAsync(out_host_.get() + top_at, out_.get() + top_at,
                        std::size_t(rows) * kTop * sizeof(TopLogprob), cudaMemcpyDeviceToHost,
                        stream),
        "copying top logprobs");
}

void DeviceSampler::deliver(std::span<const BatchItem> items) const {
  const auto* out = reinterpret_cast<const SampledRow*>(out_host_.get());
  const auto* top = reinterpret_cast<const TopLogprob*>(out_host_.get() + std::size_t(max_rows_) *
                                                                              sizeof(SampledRow));
  std::size_t r = 0;
  for (const BatchItem& item : items) {
    if (item.sample == nullptr) continue;
    *item.sample->result = out[r];
    const std::size_t n = std::size_t(item.sample->params.num_top_logprobs);
    std::copy_n(top + r * kTop, n, item.sample->top.begin());
    ++r;
  }
}

}  // namespace nibble::backend::cuda
