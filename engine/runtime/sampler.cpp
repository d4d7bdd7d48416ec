#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "engine/structured/token_bitmask.h"

namespace nibble::runtime {
namespace {

void apply_penalties(std::vector<float>& x, const SamplingParams& params,
                     std::span<const int> prompt, std::span<const int> output) {
  const int vocab = int(x.size());
  auto in_vocab = [vocab](int t) { return t >= 0 && t < vocab; };
  if (params.repetition_penalty != 1.0f) {
    std::unordered_set<int> seen(prompt.begin(), prompt.end());
    seen.insert(output.begin(), output.end());
    for (int t : seen) {
      if (!in_vocab(t)) continue;
      x[t] = x[t] > 0 ? x[t] / params.repetition_penalty : x[t] * params.repetition_penalty;
    }
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    std::unordered_map<int, int> counts;
    for (int t : output) ++counts[t];
    for (auto [t, count] : counts) {
      if (!in_vocab(t)) continue;
      x[t] -= params.frequency_penalty * float(count) + params.presence_penalty;
    }
  }
}

int argmax(const std::vector<float>& x) {
  // std::max_element returns the first maximum: ties go to the lowest token id.
  return int(std::max_element(x.begin(), x.end()) - x.begin());
}

// Draws from softmax(x) restricted by top-k, top-p and min-p.
int draw(std::vector<float>& x, const SamplingParams& params, SamplerRng& rng) {
  for (float& v : x) v /= params.temperature;
  const int vocab = int(x.size());
  const bool filtered =
      (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0f || params.min_p > 0.0f;

  std::vector<int> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::size_t kept = x.size();
  if (filtered) {
    auto by_logit = [&x](int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
    if (params.top_k > 0 && params.top_k < vocab) {
      kept = std::size_t(params.top_k);
      std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(kept), order.end(), by_logit);
    } else {
      std::sort(order.begin(), order.end(), by_logit);
    }
  }

  // Probabilities over the kept candidates, most likely first when filtered.
  const float max_logit = x[filtered ? order[0] : std::size_t(argmax(x))];
  std::vector<double> probs(kept);
  double total = 0;
  for (std::size_t i = 0; i < kept; ++i)
    total += probs[i] = std::exp(double(x[order[i]] - max_logit));
  for (double& p : probs) p /= total;

  if (params.top_p < 1.0f) {
    double cumulative = 0;
    std::size_t cut = 0;
    while (cut < kept) {
      cumulative += probs[cut++];
      if (cumulative >= params.top_p) break;
    }
    kept = std::max<std::size_t>(cut, 1);
  }
  if (params.min_p > 0.0f) {
    const double threshold = params.min_p * probs[0];
    std::size_t cut = 1;
    while (cut < kept && probs[cut] >= threshold) ++cut;
    kept = cut;
  }

  double mass = 0;
  for (std::size_t i = 0; i < kept; ++i) mass += probs[i];
  double u = double(rng.uniform()) * mass;
  for (std::size_t i = 0; i < kept; ++i) {
    u -= probs[i];
    if (u < 0) return order[i];
  }
  return order[kept - 1];  // rounding left u a hair above zero
}

}  // namespace

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
  std::vector<float> x(logits.begin(), logits.end());
  apply_penalties(x, params, prompt, output);
  if (!allowed.empty()) structured::apply_token_bitmask(x, allowed);
  SampledToken result;
  result.token = params.greedy() ? argmax(x) : draw(x, params, rng);

  if (params.logprobs >= 0) {
    const std::vector<float> lp = log_softmax(logits);
    result.logprob = lp[std::size_t(result.token)];
    const std::size_t k = std::min<std::size_t>(std::size_t(params.logprobs), lp.size());
    std::vector<int> ids(lp.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(),
                      [&lp](int a, int b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
    for (std::size_t i = 0; i < k; ++i) result.top_logprobs.push_back({ids[i], lp[ids[i]]});
  }
  return result;
}

}  // namespace nibble::runtime
