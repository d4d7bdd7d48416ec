// nibble-bench's client against the in-process server: the numbers it reports must agree with
// what the server did (token counts, concurrency limit, every request completed).
#include <gtest/gtest.h>

#include "tests/server/server_harness.h"
#include "tools/bench/bench_runner.h"

namespace nibble::bench {
namespace {

using server::testing::ServerHarness;

BenchOptions options_for(const ServerHarness& h, const std::string& endpoint) {
  BenchOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(h.port);
  o.endpoint = endpoint;
  o.input_len = 24;
  o.output_len = 10;
  o.num_prompts = 12;
  o.progress = false;
  o.seed = 5;
  return o;
}

TEST(BenchClient, CompletionsRunReportsExactTokenCountsAndRespectsConcurrency) {
  ServerHarness h({.step_delay = std::chrono::milliseconds(2)});
  BenchOptions o = options_for(h, "completions");
  o.model = first_model(o);
  EXPECT_EQ(o.model, "byte-model");
  const Dataset d = make_dataset(o);
  EXPECT_TRUE(d.exact_lengths);
  ASSERT_EQ(d.prompts.size(), 12u);
  EXPECT_EQ(d.prompts[0].ids->size(), 24u);
  const RunSummary s = run_benchmark(o, d, 4);
  EXPECT_EQ(s.completed, 12);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.input_tokens, 12 * 24);
  EXPECT_EQ(s.output_tokens, 12 * 10);
  EXPECT_LE(s.peak_concurrency, 4);
  EXPECT_GE(s.peak_concurrency, 2);
  EXPECT_GT(s.ttft.median, 0);
  EXPECT_GT(s.tpot.mean, 0);
  EXPECT_GE(s.e2e.p99, s.e2e.median);
  EXPECT_NEAR(s.output_throughput, s.output_tokens / s.duration_s, 1e-6);
  const std::string text = format_summary(s);
  EXPECT_NE(text.find("Successful requests:"), std::string::npos);
  EXPECT_NE(text.find("#"), std::string::npos) << "the throughput plot is empty";
}

// /tokenize refuses a prompt at the server's limit, so the client must tokenize its random
// words in chunks under it and still cut prompts of exactly input_len tokens.
TEST(BenchClient, ExactLengthsWhenTheTextExceedsThePromptLimit) {
  ServerHarness h({.max_model_len = 64});
  for (const std::string endpoint : {"completions", "chat"}) {
    BenchOptions o = options_for(h, endpoint);
    o.model = first_model(o);
    o.input_len = 40;  // 80 words of text: several times the limit in bytes (= tokens)
    o.output_len = 4;
    o.num_prompts = 3;
    const Dataset d = make_dataset(o);
    EXPECT_TRUE(d.exact_lengths) << endpoint;
    ASSERT_EQ(d.prompts.size(), 3u);
    for (const BenchPrompt& p : d.prompts) {
      EXPECT_EQ(p.expected_input_tokens, 40) << endpoint;
      if (endpoint == "completions") {
        ASSERT_TRUE(p.ids);
        EXPECT_EQ(p.ids->size(), 40u);
      } else {
        EXPECT_EQ(p.text.size(), 40u);  // byte tokenizer: one token per byte
      }
    }
  }
}

TEST(BenchClient, ChatRunAndFailuresAreCounted) {
  ServerHarness h;
  BenchOptions o = options_for(h, "chat");
  o.model = "byte-model";
  RunSummary s = run_benchmark(o, make_dataset(o), 3);
  EXPECT_EQ(s.completed, 12);
  EXPECT_EQ(s.output_tokens, 12 * 10);
  o.model = "no-such-model";  // every request gets a 404
  s = run_benchmark(o, make_dataset(o), 2);
  EXPECT_EQ(s.completed, 0);
  EXPECT_EQ(s.failed, 12);
  ASSERT_FALSE(s.errors.empty());
  EXPECT_NE(s.errors[0].find("404"), std::string::npos);
}

TEST(BenchClient, DistributionPercentiles) {
  const Distribution d = distribution_ms({0.001, 0.002, 0.003, 0.004, 0.100});
  EXPECT_DOUBLE_EQ(d.median, 3.0);
  EXPECT_NEAR(d.mean, 22.0, 1e-9);
  EXPECT_NEAR(d.p99, 4.0 + 0.96 * 96.0, 1e-9);
  EXPECT_NEAR(d.p90, 4.0 + 0.6 * 96.0, 1e-9);  // rank 3.6 of 0..4
  EXPECT_NEAR(d.p95, 4.0 + 0.8 * 96.0, 1e-9);
}

}  // namespace
}  // namespace nibble::bench
