// Speculative decoding in the engine loop on the CPU backend and a small random model: greedy
// tokens, finish reasons and logprobs are identical with and without speculation (ngram, oracle
// and always-wrong drafters; batches of 1, 8 and 64 with mixed lengths, max_tokens and stop
// tokens landing mid-draft), seeded sampled requests give the same tokens, sampled outputs
// follow the target's distribution (chi-square), every KV block is returned, and the
// spec_decode counters add up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "engine/backend/backend_model_runner.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/runtime/engine_loop.h"
#include "engine/spec/ngram_drafter.h"
#include "engine/spec/reference_drafter.h"
#include "tests/backend/random_model.h"
#include "tests/spec/spec_harness.h"

namespace nibble::runtime {
namespace {

using namespace std::chrono_literals;
using spec::ReferenceDrafter;
using namespace testing;

constexpr int kVocab = 97;

backend::Backend& tiny_backend() {
  static const std::unique_ptr<backend::Backend> b = backend::make_cpu_backend(
      backend::testing::random_model(testing::tiny_llama_config(2), 20261206), 1);
  return *b;
}

SpecTarget tiny() {
  return {&tiny_backend()};
}

class GreedyExactness : public ::testing::TestWithParam<int> {};

TEST_P(GreedyExactness, TokensFinishReasonsAndLogprobsMatchWithoutSpeculation) {
  expect_greedy_exactness(tiny(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Batch, GreedyExactness, ::testing::Values(1, 8, 64));

TEST(SampledExactness, SeededRequestsGiveTheSameTokensWithSpeculation) {
  const std::vector<Request> requests = seeded_sampled_requests(16, 1000);
  const auto refs = greedy_references(tiny(), mixed_greedy_requests(16));
  const SpecRun baseline = generate(tiny(), requests, nullptr, 0);
  expect_same(baseline, generate(tiny(), requests, std::make_shared<spec::NgramDrafter>(1, 4), 4),
              "ngram");
  const SpecRun oracle = generate(
      tiny(), requests,
      std::make_shared<ReferenceDrafter>(ReferenceDrafter::Mode::kOracle, refs, kVocab), 3);
  expect_same(baseline, oracle, "oracle");
  expect_counters_add_up(oracle, 3);
  EXPECT_GT(spec_metric(oracle.metrics, "num_accepted_tokens"), 0);
}

// The target's top-k tokens after `tokens` and their probabilities at temperature 1, from the
// backend's own logits.
std::vector<std::pair<int, double>> top_k_probs(const std::vector<int>& tokens, int top_k) {
  backend::Backend& b = tiny_backend();
  auto seq = b.new_sequence(64);
  std::vector<float> logits(kVocab);
  b.forward(*seq, std::vector<std::int32_t>(tokens.begin(), tokens.end()), logits);
  std::vector<int> order(kVocab);
  for (int t = 0; t < kVocab; ++t) order[std::size_t(t)] = t;
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                    [&](int x, int y) { return logits[std::size_t(x)] > logits[std::size_t(y)]; });
  double sum = 0;
  for (int j = 0; j < top_k; ++j)
    sum += std::exp(double(logits[std::size_t(order[std::size_t(j)])]));
  std::vector<std::pair<int, double>> probs;
  for (int j = 0; j < top_k; ++j)
    probs.push_back({order[std::size_t(j)],
                     std::exp(double(logits[std::size_t(order[std::size_t(j)])])) / sum});
  return probs;
}

using Path = std::vector<int>;  // the generated tokens

// Probability of every continuation of `depth` tokens, under the target with top-k sampling.
void target_paths(const std::vector<int>& prompt, int top_k, int depth, const Path& path, double p,
                  std::map<Path, double>& out) {
  if (int(path.size()) == depth) {
    out[path] = p;
    return;
  }
  std::vector<int> tokens = prompt;
  tokens.insert(tokens.end(), path.begin(), path.end());
  for (auto [t, q] : top_k_probs(tokens, top_k)) {
    Path longer = path;
    longer.push_back(t);
    target_paths(prompt, top_k, depth, longer, p * q, out);
  }
}

double chi_square(const std::map<Path, double>& expected_p, const std::map<Path, double>& observed,
                  double n) {
  double chi2 = 0;
  for (const auto& [path, p] : expected_p) {
    const auto it = observed.find(path);
    const double o = it == observed.end() ? 0 : it->second;
    chi2 += (o - n * p) * (o - n * p) / (n * p);
  }
  return chi2;
}

TEST(SampledExactness, OutputFollowsTheTargetDistributionChiSquare) {
  // Three tokens at temperature 1, top-k 3: 27 continuations. The first comes from the prefill;
  // the second is a verified draft (max_tokens leaves room for one), the third its bonus token.
  const std::vector<int> prompt = {11, 42, 7, 42, 7, 90};
  constexpr int kTopK = 3, kDepth = 3, kRequests = 12, kChoices = 500;
  constexpr double kSamples = kRequests * kChoices;
  std::map<Path, double> target;
  target_paths(prompt, kTopK, kDepth, {}, 1.0, target);
  ASSERT_EQ(target.size(), 27u);
  // The oracle knows the greedy continuation after each possible first token, so every sequence
  // drafts the target's most likely second token.
  std::vector<std::vector<int>> refs;
  std::map<int, int> greedy_second;  // first token -> the drafted second
  for (auto [t1, p1] : top_k_probs(prompt, kTopK)) {
    std::vector<int> ref = prompt;
    ref.push_back(t1);
    const int t2 = top_k_probs(ref, 1)[0].first;
    greedy_second[t1] = t2;
    ref.push_back(t2);
    refs.push_back(ref);
  }
  std::vector<Request> requests;
  for (int i = 0; i < kRequests; ++i) {
    Request r{prompt, {}};
    r.params.temperature = 1.0f;
    r.params.top_k = kTopK;
    r.params.max_tokens = kDepth;
    r.params.n = kChoices;
    r.params.seed = 7 + i;
    requests.push_back(r);
  }
  const SpecRun run = generate(
      tiny(), requests,
      std::make_shared<ReferenceDrafter>(ReferenceDrafter::Mode::kOracle, refs, kVocab), 4);
  std::map<Path, double> observed;
  for (const auto& request : run.outcomes)
    for (const Outcome& o : request) {
      ASSERT_TRUE(target.contains(o.tokens)) << "a continuation outside the top-k";
      observed[o.tokens] += 1;
    }
  EXPECT_EQ(spec_metric(run.metrics, "num_drafts"), kSamples)
      << "every sequence verified a draft for its second token";
  const double accepted = spec_metric(run.metrics, "num_accepted_tokens");
  EXPECT_GT(accepted, 0.2 * kSamples);
  EXPECT_LT(accepted, 0.95 * kSamples);
  // 27 cells, 26 degrees of freedom: P(chi2 > 54.05) = 0.001.
  constexpr double kCritical = 54.05;
  const double chi2 = chi_square(target, observed, kSamples);
  RecordProperty("chi_square", std::to_string(chi2));
  RecordProperty("accepted_fraction", std::to_string(accepted / kSamples));
  EXPECT_LT(chi2, kCritical) << "sampled outputs do not follow the target distribution";

  // The test has power against a biased verifier: one that accepted every draft would always
  // emit the greedy second token; the statistic it would be expected to produce is far past the
  // critical value. (Checked by hand too: accepting every draft in EngineLoop fails this test.)
  std::map<Path, double> always_accept;
  for (const auto& [path, p] : target) {
    if (path[1] != greedy_second.at(path[0])) continue;
    double p_second = 0;  // p(t2 | t1): the mass of the paths sharing t1, t2 over those of t1
    double p_first = 0;
    for (const auto& [other, q] : target) {
      if (other[0] != path[0]) continue;
      p_first += q;
      if (other[1] == path[1]) p_second += q;
    }
    always_accept[path] = kSamples * p / (p_second / p_first);
  }
  const double biased = chi_square(target, always_accept, kSamples);
  RecordProperty("chi_square_expected_if_always_accepting", std::to_string(biased));
  EXPECT_GT(biased, 10 * kCritical);
}

TEST(SpeculativeEngine, RefusesARunnerThatCannotVerify) {
  // A runner whose execute returns one row of logits per sequence.
  struct OneRowRunner : ModelRunner {
    int vocab_size() const override { return kVocab; }
    int num_kv_blocks() const override { return 8; }
    int kv_block_size() const override { return 4; }
    void execute(const SchedulerOutput&, std::vector<float>&) override {}
  } runner;
  metrics::Registry registry;
  EngineConfig config;
  config.drafter = std::make_shared<spec::NgramDrafter>(1, 2);
  config.num_speculative_tokens = 2;
  try {
    EngineLoop engine(config, runner, registry);
    FAIL() << "accepted a runner that cannot verify drafts";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("returns logits at several positions"), std::string::npos);
  }
}

}  // namespace
}  // namespace nibble::runtime
