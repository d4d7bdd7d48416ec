#include <gtest/gtest.h>

#include <thread>

#include "engine/runtime/engine_loop.h"
#include "tests/runtime/fake_model_runner.h"
#include "tests/runtime/test_sequences.h"

namespace nibble::runtime {
namespace {

using namespace std::chrono_literals;
using testing::FakeModelRunner;

struct Collected {
  std::vector<std::vector<int>> tokens;  // per choice
  std::vector<FinishReason> finish;
  std::vector<bool> last_is_stop_token;
};

// Reads a request's channel until every choice finished (or 20 s pass).
Collected collect(OutputChannel& channel, int n) {
  Collected c;
  c.tokens.resize(std::size_t(n));
  c.finish.assign(std::size_t(n), FinishReason::kNone);
  c.last_is_stop_token.assign(std::size_t(n), false);
  int finished = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (finished < n && std::chrono::steady_clock::now() < deadline) {
    for (TokenEvent& e : channel.pop(100ms)) {
      if (e.token >= 0) c.tokens[std::size_t(e.choice)].push_back(e.token);
      c.last_is_stop_token[std::size_t(e.choice)] = e.stop_token;
      if (e.finish != FinishReason::kNone) {
        c.finish[std::size_t(e.choice)] = e.finish;
        ++finished;
      }
    }
  }
  return c;
}

EngineConfig config(int max_queue_len = 100) {
  EngineConfig c;
  c.model_name = "fake";
  c.max_model_len = 512;
  c.max_queue_len = max_queue_len;
  c.scheduler = {.max_num_seqs = 16, .max_num_batched_tokens = 64};
  c.eos_token_ids = {31};
  return c;
}

TEST(EngineLoop, GeneratesUntilMaxTokens) {
  FakeModelRunner runner(32, 64, 4);
  metrics::Registry registry;
  EngineLoop engine(config(), runner, registry);
  engine.start();
  auto r = greedy_request("a", {1, 2, 3}, 5);
  auto channel = r.channel;
  ASSERT_EQ(engine.submit(std::move(r)).status, SubmitStatus::kAccepted);
  Collected c = collect(*channel, 1);
  EXPECT_EQ(c.tokens[0], (std::vector<int>{4, 5, 6, 7, 8}));
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
  engine.drain_and_stop(1s);
  const std::string text = registry.render();
  EXPECT_NE(text.find("nibble_generation_tokens_total{model_name=\"fake\"} 5"), std::string::npos)
      << text;
  EXPECT_NE(text.find("nibble_requests_total{model_name=\"fake\",finished_reason=\"length\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("nibble_time_to_first_token_seconds_count{model_name=\"fake\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("nibble_inter_token_latency_seconds_count{model_name=\"fake\"} 4"),
            std::string::npos);
}

TEST(EngineLoop, StopsAtEosAndStopTokenIdsUnlessIgnored) {
  FakeModelRunner runner(32, 64, 4);
  metrics::Registry registry;
  EngineLoop engine(config(), runner, registry);
  engine.start();
  auto eos = greedy_request("eos", {28}, 10);  // 29, 30, 31 (eos)
  auto stop_id = greedy_request("stop", {10}, 10);
  stop_id.params.stop_token_ids = {12};
  auto ignore = greedy_request("ignore", {29}, 4);
  ignore.params.ignore_eos = true;
  auto c1 = eos.channel, c2 = stop_id.channel, c3 = ignore.channel;
  engine.submit(std::move(eos));
  engine.submit(std::move(stop_id));
  engine.submit(std::move(ignore));
  Collected a = collect(*c1, 1), b = collect(*c2, 1), c = collect(*c3, 1);
  EXPECT_EQ(a.tokens[0], (std::vector<int>{29, 30, 31}));
  EXPECT_EQ(a.finish[0], FinishReason::kStop);
  EXPECT_TRUE(a.last_is_stop_token[0]);
  EXPECT_EQ(b.tokens[0], (std::vector<int>{11, 12}));
  EXPECT_EQ(b.finish[0], FinishReason::kStop);
  EXPECT_EQ(c.tokens[0], (std::vector<int>{30, 31, 0, 1}));
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
}

// The fake model counts on from the last token (mod 32): `length` tokens from `first`.
void expect_counting_on(OutputChannel& channel, int first, int length) {
  Collected got = collect(channel, 1);
  ASSERT_EQ(int(got.tokens[0].size()), length);
  for (std::size_t k = 0; k < got.tokens[0].size(); ++k)
    EXPECT_EQ(got.tokens[0][k], (first + int(k)) % 32) << "token " << k;
}

// Every KV block back (usage 0) after a run the cache was too small for (some preemption).
void expect_blocks_back_after_preemptions(const metrics::Registry& registry) {
  const std::string text = registry.render();
  EXPECT_NE(text.find("nibble_kv_cache_usage_ratio{model_name=\"fake\"} 0\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("nibble_preemptions_total{model_name=\"fake\"} 0\n"), std::string::npos)
      << "a cache this small must force preemptions";
}

TEST(EngineLoop, ManyConcurrentRequestsThroughASmallCacheAllComplete) {
  FakeModelRunner runner(32, 24, 4);  // 96 token slots for 40 requests of ~20-40 tokens
  metrics::Registry registry;
  EngineLoop engine(config(), runner, registry);
  engine.start();
  std::vector<std::shared_ptr<OutputChannel>> channels;
  std::vector<int> firsts;
  for (int i = 0; i < 40; ++i) {
    std::vector<int> prompt;
    for (int t = 0; t < 10 + i % 13; ++t) prompt.push_back((i + t) % 32);
    firsts.push_back((prompt.back() + 1) % 32);
    auto r = greedy_request("r" + std::to_string(i), prompt, 12 + i % 7);
    r.params.ignore_eos = true;
    channels.push_back(r.channel);
    ASSERT_EQ(engine.submit(std::move(r)).status, SubmitStatus::kAccepted);
  }
  for (int i = 0; i < 40; ++i)
    expect_counting_on(*channels[std::size_t(i)], firsts[std::size_t(i)], 12 + i % 7);
  engine.drain_and_stop(1s);
  expect_blocks_back_after_preemptions(registry);
}

// A model with sliding-window layers (window 8): the fake runner checks at every step that the
// sliding blocks before the window went back to the pool and the window is intact, through
// chunked prefills and preemptions; the usage gauge ends at 0 with every block back.
TEST(EngineLoop, SlidingWindowBlocksLeaveAndEveryRequestCompletes) {
  FakeModelRunner runner(32, 40, 4, /*sliding_window=*/8);
  metrics::Registry registry;
  EngineConfig c = config();
  c.scheduler.max_num_batched_tokens = 16;  // prompts of 20..40 tokens take several chunks
  EngineLoop engine(c, runner, registry);
  engine.start();
  std::vector<std::shared_ptr<OutputChannel>> channels;
  std::vector<int> firsts;
  for (int i = 0; i < 12; ++i) {
    std::vector<int> prompt;
    for (int t = 0; t < 20 + 2 * i; ++t) prompt.push_back((i + t) % 32);
    firsts.push_back((prompt.back() + 1) % 32);
    auto r = greedy_request("r" + std::to_string(i), prompt, 40);
    r.params.ignore_eos = true;
    channels.push_back(r.channel);
    ASSERT_EQ(engine.submit(std::move(r)).status, SubmitStatus::kAccepted);
  }
  for (int i = 0; i < 12; ++i)
    expect_counting_on(*channels[std::size_t(i)], firsts[std::size_t(i)], 40);
  engine.drain_and_stop(1s);
  expect_blocks_back_after_preemptions(registry);
}

// Prefix caching with a window of 8: prompts sharing prefixes of 3..33 tokens (around the window
// and the 4-token blocks), each sent twice, through a cache small enough to preempt and to take
// freed blocks back. The fake runner checks every step that each group's blocks hold the
// sequence's tokens, so a hit reading a sliding block that went back to the pool and was written
// by another sequence fails here; hits are taken.
TEST(EngineLoop, SlidingWindowPrefixHitsReadOnlyCachedWindows) {
  FakeModelRunner runner(32, 48, 4, /*sliding_window=*/8);
  metrics::Registry registry;
  EngineConfig c = config();
  c.scheduler.max_num_batched_tokens = 16;
  EngineLoop engine(c, runner, registry);
  engine.start();
  std::vector<std::shared_ptr<OutputChannel>> channels;
  std::vector<int> firsts;
  int i = 0;
  for (int shared : {3, 4, 5, 7, 8, 9, 11, 12, 13, 16, 17, 20, 24, 25, 32, 33}) {
    std::vector<int> prompt;
    for (int t = 0; t < shared; ++t) prompt.push_back(t % 32);
    for (int t = 0; t < 1 + shared % 5; ++t) prompt.push_back((shared + 7 + 3 * t) % 32);
    for (int copy = 0; copy < 2; ++copy, ++i) {
      firsts.push_back((prompt.back() + 1) % 32);
      auto r = greedy_request("r" + std::to_string(i), prompt, 10 + i % 5);
      r.params.ignore_eos = true;
      channels.push_back(r.channel);
      ASSERT_EQ(engine.submit(std::move(r)).status, SubmitStatus::kAccepted);
    }
  }
  for (int k = 0; k < i; ++k)
    expect_counting_on(*channels[std::size_t(k)], firsts[std::size_t(k)], 10 + k % 5);
  engine.drain_and_stop(1s);
  expect_blocks_back_after_preemptions(registry);
  const std::string text = registry.render();
  EXPECT_EQ(text.find("nibble_prefix_cache_hits_total{model_name=\"fake\"} 0\n"), std::string::npos)
      << "no prefix hit taken";
}

TEST(EngineLoop, CancelledRequestsAreAbortedAndFreeTheirBlocks) {
  FakeModelRunner runner(32, 64, 4);
  metrics::Registry registry;
  EngineLoop engine(config(), runner, registry);
  engine.start();
  runner.step_delay = 2ms;  // 200 tokens take 0.4 s: still running when cancelled
  auto r = greedy_request("long", {1}, 200);
  r.params.ignore_eos = true;
  auto channel = r.channel;
  engine.submit(std::move(r));
  channel->pop(2s);  // first token(s) arrived
  channel->cancel();
  Collected c = collect(*channel, 1);
  EXPECT_EQ(c.finish[0], FinishReason::kAbort);
  engine.drain_and_stop(1s);
  const std::string text = registry.render();
  EXPECT_NE(text.find("finished_reason=\"abort\"} 1"), std::string::npos);
  EXPECT_NE(text.find("nibble_kv_cache_usage_ratio{model_name=\"fake\"} 0\n"), std::string::npos);
}

TEST(EngineLoop, RefusesWhenTheQueueIsFullOrThePromptCannotFit) {
  FakeModelRunner runner(32, 8, 4);  // 32 token slots
  metrics::Registry registry;
  EngineLoop engine(config(2), runner, registry);  // not started: nothing leaves the queue
  EXPECT_EQ(engine.submit(greedy_request("a", {1}, 1)).status, SubmitStatus::kAccepted);
  EXPECT_EQ(engine.submit(greedy_request("b", {1}, 1)).status, SubmitStatus::kAccepted);
  SubmitResult full = engine.submit(greedy_request("c", {1}, 1));
  EXPECT_EQ(full.status, SubmitStatus::kQueueFull);
  EXPECT_NE(full.message.find("2 waiting"), std::string::npos);
  EXPECT_EQ(engine.submit(greedy_request("big", std::vector<int>(32, 1), 1)).status,
            SubmitStatus::kInvalid);
  EXPECT_EQ(engine.submit(greedy_request("empty", {}, 1)).status, SubmitStatus::kInvalid);
}

TEST(EngineLoop, DrainAbortsWhatCannotFinishInTime) {
  FakeModelRunner runner(32, 64, 4);
  metrics::Registry registry;
  EngineLoop engine(config(), runner, registry);
  engine.start();
  runner.step_delay = 2ms;
  auto r = greedy_request("long", {1}, 200);
  r.params.ignore_eos = true;
  auto channel = r.channel;
  engine.submit(std::move(r));
  engine.drain_and_stop(0ms);
  EXPECT_FALSE(engine.accepting());
  EXPECT_EQ(engine.submit(greedy_request("late", {1}, 1)).status, SubmitStatus::kNotAccepting);
  Collected c = collect(*channel, 1);
  EXPECT_EQ(c.finish[0], FinishReason::kAbort);
}

TEST(EngineLoop, DeviceFailureFailsTheBatchAndTheEngineCarriesOn) {
  FakeModelRunner runner(32, 64, 4);
  metrics::Registry registry;
  EngineLoop engine(config(), runner, registry);
  runner.fail_next = true;
  engine.start();
  auto bad = greedy_request("bad", {1}, 3);
  auto c1 = bad.channel;
  engine.submit(std::move(bad));
  EXPECT_EQ(collect(*c1, 1).finish[0], FinishReason::kError);
  auto good = greedy_request("good", {1}, 3);
  auto c2 = good.channel;
  engine.submit(std::move(good));
  EXPECT_EQ(collect(*c2, 1).tokens[0], (std::vector<int>{2, 3, 4}));
}

TEST(EngineLoop, NChoicesWithASeedAreReproducible) {
  auto run_once = [] {
    FakeModelRunner runner(32, 64, 4);
    metrics::Registry registry;
    EngineLoop engine(config(), runner, registry);
    engine.start();
    auto r = greedy_request("n", {1, 2}, 6);
    r.params.temperature = 30.0f;  // flattens the fake model's peak: real sampling
    r.params.seed = 1234;
    r.params.n = 3;
    r.params.ignore_eos = true;
    auto channel = r.channel;
    engine.submit(std::move(r));
    return collect(*channel, 3).tokens;
  };
  const auto first = run_once();
  EXPECT_EQ(first, run_once());
  EXPECT_TRUE(first[0] != first[1] || first[1] != first[2]) << "choices should differ";
}

}  // namespace
}  // namespace nibble::runtime
