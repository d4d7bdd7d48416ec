#include "engine/backend/sampled_decode.h"

#include <chrono>
#include <numeric>
#include <string>

#include "engine/backend/own_cache_sequence.h"

namespace nibble::backend {

SampledTrace greedy_decode_on_device(Backend& backend, const std::vector<std::int32_t>& prompt,
                                     int new_tokens, int top_logprobs,
                                     const SampledStepCallback& on_step) {
  if (!backend.samples_on_device())
    throw BackendError(backend.name() + " backend: does not sample on the device");
  if (prompt.empty()) throw BackendError("greedy decode: the prompt is empty");
  if (new_tokens < 1) throw BackendError("greedy decode: needs at least one new token");
  if (top_logprobs < 0 || top_logprobs > kernels::kMaxSampledTopLogprobs)
    throw BackendError("greedy decode: top log-probabilities must be 0.." +
                       std::to_string(kernels::kMaxSampledTopLogprobs));
  constexpr int kBlock = 16;
  const long positions = long(prompt.size()) + new_tokens;
  if (positions > backend.config().max_context)
    throw BackendError("greedy decode: " + std::to_string(positions) +
                       " positions exceed the model's context of " +
                       std::to_string(backend.config().max_context));
  const PrivateCache cache = new_private_cache(backend, int(positions), kBlock);

  using clock = std::chrono::steady_clock;
  SampledTrace trace;
  std::vector<kernels::TopLogprob> top(std::size_t(kernels::kMaxSampledTopLogprobs));
  kernels::SampledRow picked;
  DeviceSampling request;
  request.params.temperature = 0.0f;  // greedy
  request.params.num_top_logprobs = top_logprobs;
  request.result = &picked;
  request.top = std::span(top.data(), std::size_t(top_logprobs));
  std::vector<std::int32_t> input = prompt;
  int start = 0;
  for (int step = 0; step < new_tokens; ++step) {
    request.params.position = std::uint64_t(step);
    BatchItem item = cache.item(input, start);
    item.sample = &request;
    const auto begin = clock::now();
    backend.forward_batch(*cache.cache, std::span(&item, 1));
    const double seconds = std::chrono::duration<double>(clock::now() - begin).count();
    (step == 0 ? trace.prefill_seconds : trace.decode_seconds) += seconds;
    start += int(input.size());
    SampledStep s;
    s.token = picked.token;
    s.logprob = picked.logprob;
    s.top.assign(top.begin(), top.begin() + top_logprobs);
    if (on_step) on_step(step, s);
    input = {s.token};
    trace.steps.push_back(std::move(s));
  }
  return trace;
}

}  // namespace nibble::backend
