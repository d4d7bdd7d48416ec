// The engine loop's device sampling path (ModelRunner::execute_sampled) against its host path:
// a runner whose "device" samples with the CPU reference of the device pass must give exactly
// the tokens and logprobs the host sampler gives, for seeded and greedy requests with penalties,
// filters and logprobs, whatever else shares the batch: the engine's penalty lists, RNG
// positions and logprob plumbing are what differ between the two paths.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/runtime/engine_loop.h"
#include "engine/structured/token_bitmask.h"
#include "tests/runtime/hash_logits_runner.h"

namespace nibble::runtime {
namespace {

using namespace std::chrono_literals;

using test_support::HashLogitsRunner;
using test_support::Output;
using test_support::run;

std::vector<GenerationRequest> requests() {
  std::vector<GenerationRequest> out;
  auto add = [&out](SamplingParams p, std::vector<int> prompt) {
    GenerationRequest r;
    r.id = "r" + std::to_string(out.size());
    r.prompt = std::move(prompt);
    r.params = p;
    r.channel = std::make_shared<OutputChannel>();
    out.push_back(std::move(r));
  };
  SamplingParams seeded;
  seeded.max_tokens = 24;
  seeded.temperature = 0.8f;
  seeded.top_k = 20;
  seeded.top_p = 0.9f;
  seeded.repetition_penalty = 1.3f;
  seeded.frequency_penalty = 0.5f;
  seeded.presence_penalty = 0.2f;
  seeded.logprobs = 3;
  seeded.seed = 1234;
  seeded.n = 2;
  add(seeded, {1, 2, 3, 4, 5, 1, 2});
  SamplingParams greedy;
  greedy.max_tokens = 20;
  greedy.temperature = 0;
  greedy.repetition_penalty = 1.5f;
  greedy.logprobs = 0;
  add(greedy, {7, 8, 9});
  SamplingParams plain;  // temperature 1, min-p, no logprobs
  plain.max_tokens = 16;
  plain.min_p = 0.1f;
  plain.seed = 99;
  add(plain, {40, 41});
  return out;
}

TEST(EngineDeviceSampling, SameTokensAndLogprobsAsHostSampling) {
  HashLogitsRunner host(300, false), device(300, true);
  const Output a = run(host, requests());
  const Output b = run(device, requests());
  EXPECT_GT(host.host_steps, 0);
  EXPECT_EQ(host.device_steps, 0);
  EXPECT_GT(device.device_steps, 0);
  EXPECT_EQ(device.host_steps, 0);
  ASSERT_EQ(a.tokens.size(), 4u);
  EXPECT_EQ(a.tokens, b.tokens);
  for (std::size_t k = 0; k < a.tokens.size(); ++k) {
    EXPECT_GE(a.tokens[k].size(), 16u);
    EXPECT_EQ(a.logprobs[k], b.logprobs[k]);
    for (std::size_t t = 0; t < a.top[k].size(); ++t) {
      ASSERT_EQ(a.top[k][t].size(), b.top[k][t].size());
      for (std::size_t j = 0; j < a.top[k][t].size(); ++j) {
        EXPECT_EQ(a.top[k][t][j].token, b.top[k][t][j].token);
        EXPECT_EQ(a.top[k][t][j].logprob, b.top[k][t][j].logprob);
      }
    }
  }
  EXPECT_EQ(a.top[0][0].size(), 3u);    // logprobs 3
  EXPECT_TRUE(a.top[3][0].empty());     // no logprobs asked
  EXPECT_NE(a.tokens[0], a.tokens[1]);  // the n choices draw their own streams
}

TEST(EngineDeviceSampling, MoreTopLogprobsThanTheDeviceReturnsSampleOnTheHost) {
  HashLogitsRunner device(300, true);
  std::vector<GenerationRequest> reqs = requests();
  reqs.resize(1);
  reqs[0].params.logprobs = kernels::kMaxSampledTopLogprobs + 1;
  const Output out = run(device, std::move(reqs));
  EXPECT_GT(device.host_steps, 0);
  EXPECT_EQ(device.device_steps, 0);
  ASSERT_FALSE(out.top[0].empty());
  EXPECT_EQ(out.top[0][0].size(), std::size_t(kernels::kMaxSampledTopLogprobs + 1));
}

// A constraint whose allowed tokens depend on every token it accepted (a hash of them): about a
// third of the vocabulary, a different third after each token, and a slow enough mask that
// parallel masks overlap. Any mix-up of rows, states or steps changes the tokens.
class HashConstraint : public structured::TokenConstraint {
 public:
  explicit HashConstraint(int vocab) : vocab_(vocab) {}
  void fill_mask(std::span<std::uint32_t> mask) override {
    for (int t = 0; t < vocab_; ++t)
      if (allows(t)) structured::bitmask_allow(mask, std::size_t(t));
  }
  bool advance(int token) override {
    if (!allows(token)) return false;
    state_ = (state_ ^ std::uint64_t(token)) * 1099511628211ull;
    return true;
  }
  bool is_complete() const override { return false; }

 private:
  bool allows(int t) const {
    std::uint64_t z = state_ + 0x9e3779b97f4a7c15ull * std::uint64_t(t + 1);
    z = (z ^ (z >> 29)) * 0xbf58476d1ce4e5b9ull;
    return (z >> 33) % 3 == 0;
  }
  int vocab_;
  std::uint64_t state_ = 1469598103934665603ull;
};

class HashConstraintFactory : public structured::TokenConstraintFactory {
 public:
  explicit HashConstraintFactory(int vocab) : vocab_(vocab) {}
  std::unique_ptr<structured::TokenConstraint> start() const override {
    return std::make_unique<HashConstraint>(vocab_);
  }
  std::size_t mask_words() const override { return structured::bitmask_words(std::size_t(vocab_)); }
  const std::string& kind() const override { return kind_; }

 private:
  int vocab_;
  std::string kind_ = "regex";
};

// requests() with the first (n = 2) and last constrained, the greedy one not: steps mix
// constrained and unconstrained rows.
std::vector<GenerationRequest> constrained_requests(int vocab) {
  std::vector<GenerationRequest> reqs = requests();
  const auto factory = std::make_shared<HashConstraintFactory>(vocab);
  reqs.front().constraint = factory;
  reqs.back().constraint = factory;
  return reqs;
}

EngineConfig mask_config(bool overlap, int threads) {
  EngineConfig c;
  c.overlap_token_masks = overlap;
  c.token_mask_threads = threads;
  return c;
}

void expect_allowed_by_the_constraint(const std::vector<int>& tokens, int vocab) {
  HashConstraint check(vocab);
  for (int t : tokens) EXPECT_TRUE(check.advance(t)) << t;
}

// Overlapped masks (computed inside the step, in parallel) against serial ones (before the
// step, on the engine thread), for host and device sampling: the same tokens and logprobs.
TEST(EngineTokenMasks, OverlappedAndParallelMasksGiveTheSerialTokens) {
  constexpr int kVocab = 300;
  for (bool device : {false, true}) {
    HashLogitsRunner serial(kVocab, device), overlapped(kVocab, device);
    const Output a = run(serial, constrained_requests(kVocab), mask_config(false, 1));
    const Output b = run(overlapped, constrained_requests(kVocab), mask_config(true, 4));
    EXPECT_EQ(serial.overlapped_steps, 0);
    EXPECT_GT(overlapped.overlapped_steps, 10);
    EXPECT_EQ(device ? overlapped.device_steps : overlapped.host_steps,
              overlapped.overlapped_steps);
    ASSERT_EQ(a.tokens.size(), 4u);
    EXPECT_EQ(a.tokens, b.tokens) << "device " << device;
    EXPECT_EQ(a.logprobs, b.logprobs) << "device " << device;
    for (std::size_t k : {0u, 1u, 3u}) {
      EXPECT_GE(a.tokens[k].size(), 16u);
      expect_allowed_by_the_constraint(a.tokens[k], kVocab);
    }
    // The unconstrained request is not held to the constraint: some token breaks it.
    HashConstraint free(kVocab);
    bool broke = false;
    for (int t : a.tokens[2]) broke = broke || !free.advance(t);
    EXPECT_TRUE(broke);
  }
}

// The configuration switch (serve's --token-mask-overlap false) turns overlapping off.
TEST(EngineTokenMasks, ConfigTurnsOverlapOff) {
  HashLogitsRunner runner(300, true);
  const Output out = run(runner, constrained_requests(300), mask_config(false, 2));
  EXPECT_EQ(runner.overlapped_steps, 0);
  EXPECT_GT(runner.device_steps, 10);
  ASSERT_EQ(out.tokens.size(), 4u);
  expect_allowed_by_the_constraint(out.tokens[0], 300);
}

}  // namespace
}  // namespace nibble::runtime
