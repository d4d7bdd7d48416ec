#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/runtime/penalty_list.h"
#include "kernels/sampling/sampling_ref.h"

namespace nibble::runtime {

kernels::SamplingRow sampling_row(const SamplingParams& params, const SamplerRng& rng) {
  kernels::SamplingRow row;
  row.temperature = params.greedy() ? 0.0f : params.temperature;
  row.top_p = params.top_p;
  row.min_p = params.min_p;
  row.top_k = params.top_k;
  row.repetition_penalty = params.repetition_penalty;
  row.presence_penalty = params.presence_penalty;
  row.frequency_penalty = params.frequency_penalty;
  row.num_top_logprobs = std::max(params.logprobs, 0);
  row.seed = rng.seed();
  row.position = rng.position();
  return row;
}

std::vector<float> log_softmax(std::span<const float> logits) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v - max_logit));
  const double log_sum = std::log(sum) + max_logit;
  std::vector<float> out(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = float(double(logits[i]) - log_sum);
  return out;
}

SampledToken sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int> prompt, std::span<const int> output, SamplerRng& rng,
                          std::span<const std::uint32_t> allowed) {
  PenaltyList penalties(params);
  std::vector<int> tokens(prompt.begin(), prompt.end());
  tokens.insert(tokens.end(), output.begin(), output.end());
  penalties.update(tokens, int(prompt.size()));
  std::vector<kernels::TopLogprob> top;
  const kernels::SampledRow sampled = kernels::sample_row_reference(
      logits, sampling_row(params, rng), penalties.entries(), allowed, top, params.logprobs >= 0);
  rng.advance();
  SampledToken result;
  result.token = sampled.token;
  if (params.logprobs >= 0) {
    result.logprob = sampled.logprob;
    for (const kernels::TopLogprob& t : top) result.top_logprobs.push_back({t.token, t.logprob});
  }
  return result;
}

}  // namespace nibble::runtime
