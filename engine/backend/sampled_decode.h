#pragma once
// Greedy decoding with the next token picked on the device (Backend::samples_on_device()): the
// serving path's decode, where only the token and its log-probabilities cross to the host. What
// `nibble-engine generate --sample-on-device` times, beside greedy_decode's full-logits path.
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend/backend.h"

namespace nibble::backend {

struct SampledStep {
  std::int32_t token = 0;
  float logprob = 0.0f;                      // of the token, under the raw distribution
  std::vector<kernels::TopLogprob> top;      // the requested top log-probabilities, largest first
};

struct SampledTrace {
  std::vector<SampledStep> steps;  // steps[0] follows the prompt, then one per decoded token
  double prefill_seconds = 0;
  double decode_seconds = 0;  // all steps after the first
};

// Runs the prompt, then feeds back the device's greedy pick `new_tokens - 1` times, in a private
// paged cache (forward_batch, as the engine serves). top_logprobs: 0..kMaxSampledTopLogprobs per
// step. Throws BackendError when the backend does not sample on the device, or on bad arguments.
using SampledStepCallback = std::function<void(int step, const SampledStep& s)>;
SampledTrace greedy_decode_on_device(Backend& backend, const std::vector<std::int32_t>& prompt,
                                     int new_tokens, int top_logprobs,
                                     const SampledStepCallback& on_step = nullptr);

}  // namespace nibble::backend
