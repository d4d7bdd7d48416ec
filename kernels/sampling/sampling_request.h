#pragma once
// One row's request to a device sampling pass, as the engine hands it to a backend
// (engine/backend/backend.h BatchItem::sample): parameters, the row's penalty list and bitmask
// on the host, and where the result goes. Host code only.
#include <cstdint>
#include <span>

#include "kernels/sampling/sampling_types.h"

namespace nibble::kernels {

struct SamplingRequest {
  // penalty_offset, penalty_count and bitmask_offset are set where the step is packed.
  SamplingRow params;
  std::span<const SamplingPenalty> penalties;  // tokens unique
  std::span<const std::uint32_t> bitmask;      // bitmask_words(vocab) words, or empty: none
  SampledRow* result = nullptr;
  std::span<TopLogprob> top;  // params.num_top_logprobs entries (<= kMaxSampledTopLogprobs)
};

}  // namespace nibble::kernels
