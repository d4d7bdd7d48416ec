#include "kernels/sampling/sampling_ref.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

namespace nibble::kernels {
namespace {

using namespace sampling_math;

std::uint32_t key_of(float v) {
  return order_key(std::bit_cast<std::uint32_t>(v));
}

bool allowed(std::span<const std::uint32_t> bitmask, std::size_t token) {
  if (bitmask.empty()) return true;
  return token / 32 < bitmask.size() && ((bitmask[token / 32] >> (token % 32)) & 1u) != 0;
}

// Steps 2 and 3: the processed logits z.
std::vector<float> processed(std::span<const float> logits, const SamplingRow& row,
                             std::span<const SamplingPenalty> penalties,
                             std::span<const std::uint32_t> bitmask) {
  std::vector<float> z(logits.begin(), logits.end());
  for (const SamplingPenalty& p : penalties) {
    if (p.token < 0 || std::size_t(p.token) >= z.size()) continue;
    z[std::size_t(p.token)] = penalized_logit(z[std::size_t(p.token)], row, p.output_count);
  }
  if (!bitmask.empty())
    for (std::size_t i = 0; i < z.size(); ++i)
      if (!allowed(bitmask, i)) z[i] = -std::numeric_limits<float>::infinity();
  return z;
}

std::int32_t argmax(std::span<const float> z) {
  std::uint64_t best = 0;
  for (std::size_t i = 0; i < z.size(); ++i)
    best = std::max(best, pack_argmax(key_of(z[i]), std::int32_t(i)));
  return unpack_argmax_id(best);
}

// Step 5 over y = z / T: whether each token is kept; also returns the weights w.
struct Kept {
  std::vector<float> w;
  std::uint32_t threshold = 0;  // key: kept tokens have key(y) >= threshold
};

// y = z / T is formed per element (max(z) / T is max(y): division by T > 0 keeps the order), and
// keys only where top-k or top-p needs them: a 152k row is not copied or keyed without need.
Kept keep(const std::vector<float>& z, const SamplingRow& row) {
  const std::size_t vocab = z.size();
  const float temperature = row.temperature;
  Kept k;
  const float max_y = *std::max_element(z.begin(), z.end()) / temperature;
  const bool top_k = row.top_k > 0 && std::size_t(row.top_k) < vocab;
  const bool keyed = top_k || row.top_p < 1.0f;
  k.w.resize(vocab);
  std::vector<std::uint32_t> keys(keyed ? vocab : 0);
  for (std::size_t i = 0; i < vocab; ++i) {
    const float y = z[i] / temperature;
    k.w[i] = std::exp(y - max_y);
    if (keyed) keys[i] = key_of(y);
  }
  std::uint32_t t_k = 0;
  if (top_k) {
    std::vector<std::uint32_t> sorted = keys;
    std::nth_element(sorted.begin(), sorted.begin() + (row.top_k - 1), sorted.end(),
                     std::greater<>());
    t_k = sorted[std::size_t(row.top_k - 1)];
  }
  std::uint32_t t_p = 0;
  if (row.top_p < 1.0f) {
    std::vector<std::size_t> order;
    std::uint64_t mass = 0;
    for (std::size_t i = 0; i < vocab; ++i) {
      if (keys[i] < t_k) continue;
      order.push_back(i);
      mass += fixed_mass(k.w[i]);
    }
    std::sort(order.begin(), order.end(),
              [&keys](std::size_t a, std::size_t b) { return keys[a] > keys[b]; });
    const std::uint64_t target = top_p_target(row.top_p, mass);
    std::uint64_t cumulative = 0;
    // Whole runs of equal keys at a time: the threshold is a value, ties stay together.
    for (std::size_t i = 0; i < order.size();) {
      std::size_t j = i;
      while (j < order.size() && keys[order[j]] == keys[order[i]])
        cumulative += fixed_mass(k.w[order[j++]]);
      if (cumulative >= target) {
        t_p = keys[order[i]];
        break;
      }
      i = j;
    }
  }
  k.threshold = std::max(t_k, t_p);
  for (std::size_t i = 0; i < vocab; ++i) {
    const bool kept = (!keyed || keys[i] >= k.threshold) && k.w[i] > 0.0f &&
                      (row.min_p <= 0.0f || k.w[i] >= row.min_p);
    if (!kept) k.w[i] = 0.0f;
  }
  return k;
}

}  // namespace

SampledRow sample_row_reference(std::span<const float> logits, const SamplingRow& row,
                                std::span<const SamplingPenalty> penalties,
                                std::span<const std::uint32_t> bitmask,
                                std::vector<TopLogprob>& top, bool logprobs) {
  const std::size_t vocab = logits.size();
  const std::vector<float> z = processed(logits, row, penalties, bitmask);
  SampledRow out;
  if (row.temperature <= 0.0f) {
    out.token = argmax(z);
  } else {
    const Kept kept = keep(z, row);
    std::uint64_t best = 0;
    float best_score = 0.0f;
    bool any = false;
    for (std::size_t group = 0; group * 4 < vocab; ++group) {
      const Philox4 r = token_randoms(row.seed, row.position, std::uint32_t(group));
      for (std::size_t j = 0; j < 4 && group * 4 + j < vocab; ++j) {
        const std::size_t i = group * 4 + j;
        if (kept.w[i] <= 0.0f) continue;
        // e = -log(1 - v) >= v: where v is clearly above w / best the token cannot win, and
        // most tokens skip the logarithm (the margin covers rounding; the result is unchanged).
        const float v = exponential_source(r.v[j]);
        if (any && v > kept.w[i] / best_score * 1.00001f) continue;
        const float score = kept.w[i] / -log1pf(-v);
        const std::uint64_t packed = pack_argmax(key_of(score), std::int32_t(i));
        if (!any || packed > best) best = packed, best_score = score;
        any = true;
      }
    }
    out.token = any ? unpack_argmax_id(best) : argmax(z);  // none: every logit NaN or -inf
  }

  top.clear();
  if (!logprobs) return out;
  // Step 1: raw log-probabilities (the sum in double).
  const float max_x = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += double(std::exp(v - max_x));
  const double log_sum = std::log(sum) + double(max_x);
  out.logprob = float(double(logits[std::size_t(out.token)]) - log_sum);
  const std::size_t n =
      std::min<std::size_t>(std::size_t(std::max(row.num_top_logprobs, 0)), vocab);
  if (n == 0) return out;
  std::vector<std::int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n), ids.end(),
                    [&logits](std::int32_t a, std::int32_t b) {
                      return pack_argmax(key_of(logits[std::size_t(a)]), a) >
                             pack_argmax(key_of(logits[std::size_t(b)]), b);
                    });
  for (std::size_t i = 0; i < n; ++i)
    top.push_back({ids[i], float(double(logits[std::size_t(ids[i])]) - log_sum)});
  return out;
}

std::vector<std::int32_t> kept_tokens_reference(std::span<const float> logits,
                                                const SamplingRow& row,
                                                std::span<const SamplingPenalty> penalties,
                                                std::span<const std::uint32_t> bitmask) {
  const std::vector<float> z = processed(logits, row, penalties, bitmask);
  std::vector<std::int32_t> out;
  if (row.temperature <= 0.0f) {
    out.push_back(argmax(z));
    return out;
  }
  const Kept kept = keep(z, row);
  for (std::size_t i = 0; i < kept.w.size(); ++i)
    if (kept.w[i] > 0.0f) out.push_back(std::int32_t(i));
  return out;
}

}  // namespace nibble::kernels
