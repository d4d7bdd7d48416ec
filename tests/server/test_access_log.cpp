// Issue 45 item 6: the engine logs a line per request (method, path, status, model, tokens, time
// to first token, duration) and never the prompt's text; the periodic stats line reports
// throughput, queue and KV cache usage as vLLM's does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "engine/server/access_log.h"
#include "engine/server/engine_stats_log.h"
#include "tests/server/log_capture.h"
#include "tests/server/server_harness.h"

namespace nibble::server {
namespace {

using nibble::testing::LogCapture;
using ::testing::HasSubstr;
using testing::json;
using ::testing::Not;
using testing::post;
using testing::ServerHarness;

const std::string kSecret = "the secret prompt of a user";

TEST(AccessLog, OneLinePerRequestWithTokensAndTimesNeverThePrompt) {
  LogCapture log;
  {
    ServerHarness h;
    const json answer = post(
        h, "/v1/completions",
        {{"model", "byte-model"}, {"prompt", kSecret}, {"max_tokens", 5}, {"temperature", 0}}, 200);
    const std::string completion = log.wait_for("\"POST /v1/completions\"");
    const std::regex expected(
        R"(^info: access: 127\.0\.0\.1 "POST /v1/completions" 200 model=byte-model )"
        R"(id=cmpl-[0-9A-Za-z]{24} prompt_tokens=([0-9]+) output_tokens=5 )"
        R"(ttft_ms=[0-9]+\.[0-9] duration_ms=[0-9]+\.[0-9]$)");
    std::smatch fields;
    ASSERT_TRUE(std::regex_match(completion, fields, expected)) << completion;
    EXPECT_EQ(fields[1].str(), answer["usage"]["prompt_tokens"].dump());
    EXPECT_THAT(completion, HasSubstr("id=" + answer["id"].get<std::string>()));

    // A stream is logged once its last chunk is written, with its tokens.
    const auto events = testing::stream(h, "/v1/chat/completions",
                                        {{"messages", {{{"role", "user"}, {"content", kSecret}}}},
                                         {"max_tokens", 4},
                                         {"stream", true}});
    ASSERT_FALSE(events.empty());
    const std::string chat = log.wait_for("\"POST /v1/chat/completions\"");
    EXPECT_THAT(chat, HasSubstr(" 200 model=byte-model id=chatcmpl-"));
    EXPECT_THAT(chat, HasSubstr(" output_tokens=4 ttft_ms="));
    EXPECT_THAT(chat, HasSubstr(" duration_ms="));

    // Refusals carry what the request got to: the model it named, no tokens.
    post(h, "/v1/completions", {{"model", "gpt-4"}, {"prompt", kSecret}}, 404);
    const std::string refused = log.wait_for("\"POST /v1/completions\" 404");
    EXPECT_THAT(refused, HasSubstr(" model=gpt-4 duration_ms="));
    EXPECT_THAT(refused, Not(HasSubstr("tokens=")));

    auto c = h.client();
    ASSERT_TRUE(c.Get("/v1/models"));
    EXPECT_THAT(log.wait_for("\"GET /v1/models\""),
                HasSubstr("\"GET /v1/models\" 200 duration_ms="));
    // Probes and scrapes stay out of the info log.
    ASSERT_TRUE(c.Get("/health"));
    ASSERT_TRUE(c.Get("/metrics"));
    ASSERT_TRUE(c.Get("/nowhere"));
    EXPECT_THAT(log.wait_for("\"GET /nowhere\" 404"), Not(HasSubstr("duration_ms")));
    EXPECT_THAT(log.text(), Not(HasSubstr("/health")));
    EXPECT_THAT(log.text(), Not(HasSubstr("/metrics")));
  }
  EXPECT_THAT(log.text(), Not(HasSubstr("secret")));
}

TEST(AccessLog, ClientTextCannotForgeLines) {
  LogCapture log;
  {
    ServerHarness h;
    post(h, "/v1/completions", {{"model", "x\n\"info: access: forged"}, {"prompt", "a"}}, 404);
    auto c = h.client();
    ASSERT_TRUE(c.Get("/v1/models%0Aforged"));
    const std::string model = log.wait_for("\"POST /v1/completions\" 404");
    EXPECT_THAT(model, HasSubstr(R"( model=x\x0a\x22info: access: forged duration_ms=)"));
    const std::string path = log.wait_for("forged\" 404");
    EXPECT_THAT(path, HasSubstr(R"("GET /v1/models\x0aforged" 404)"));
  }
  for (const std::string& line : log.lines()) EXPECT_EQ(line.find('\n'), std::string::npos) << line;
}

TEST(AccessLog, OffLogsNothing) {
  LogCapture log;
  {
    ServerHarness h({.access_log = false});
    post(h, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}}, 200);
    auto c = h.client();
    ASSERT_TRUE(c.Get("/v1/models"));
  }
  EXPECT_THAT(log.text(), Not(HasSubstr("access:")));
}

TEST(AccessLog, FormatLeavesOutWhatARequestDidNotReach) {
  AccessRecord r{.client = "10.0.0.7", .method = "GET", .path = "/v1/models", .status = 401};
  EXPECT_EQ(format_access_line(r), R"(access: 10.0.0.7 "GET /v1/models" 401)");
  r = {.client = "10.0.0.7",
       .method = "POST",
       .path = "/v1/chat/completions",
       .status = 200,
       .model = "qwen3",
       .id = "chatcmpl-abc",
       .prompt_tokens = 12,
       .output_tokens = 30,
       .ttft_seconds = 0.04123,
       .duration_seconds = 0.5123};
  EXPECT_EQ(format_access_line(r),
            R"(access: 10.0.0.7 "POST /v1/chat/completions" 200 model=qwen3 id=chatcmpl-abc )"
            R"(prompt_tokens=12 output_tokens=30 ttft_ms=41.2 duration_ms=512.3)");
  r = {.method = "GET", .path = std::string(300, 'a'), .status = 404};
  EXPECT_EQ(format_access_line(r), "access: - \"GET " + std::string(200, 'a') + "...\" 404");
}

TEST(EngineStatsLog, LineIsThroughputOverTheIntervalAndStateAtItsEnd) {
  EngineStatsSample before{.at = std::chrono::steady_clock::time_point(std::chrono::seconds(100)),
                           .prompt_tokens = 1000,
                           .generation_tokens = 200,
                           .prefix_queries = 1000,
                           .prefix_hits = 100};
  EngineStatsSample after = before;
  after.at += std::chrono::seconds(10);
  after.prompt_tokens += 5120;
  after.generation_tokens += 803;
  after.prefix_queries += 5120;
  after.prefix_hits += 2048;
  after.running = 3;
  after.waiting = 1;
  after.kv_cache_usage = 0.125;
  const EngineStatsLine line = engine_stats_line(before, after);
  EXPECT_EQ(line.text,
            "engine: Avg prompt throughput: 512.0 tokens/s, Avg generation throughput: 80.3 "
            "tokens/s, Running: 3 reqs, Waiting: 1 reqs, KV cache usage: 12.5%, Prefix cache "
            "hit rate: 40.0%");
  EXPECT_TRUE(line.had_tokens);
  EXPECT_TRUE(line.busy);
  const EngineStatsSample idle = {.at = after.at + std::chrono::seconds(10),
                                  .prompt_tokens = after.prompt_tokens,
                                  .generation_tokens = after.generation_tokens,
                                  .prefix_queries = after.prefix_queries,
                                  .prefix_hits = after.prefix_hits};
  const EngineStatsLine quiet = engine_stats_line(after, idle);
  EXPECT_THAT(quiet.text, HasSubstr("Avg prompt throughput: 0.0 tokens/s"));
  EXPECT_THAT(quiet.text, HasSubstr("Prefix cache hit rate: 0.0%"));
  EXPECT_FALSE(quiet.had_tokens);
  EXPECT_FALSE(quiet.busy);
}

// vLLM's rule: info while there is work, and for the first idle interval after it; debug after.
TEST(EngineStatsLog, LogsAtInfoOnlyAroundActivity) {
  LogCapture log(spdlog::level::debug);
  {
    ServerHarness h;
    EngineStatsLog stats(h.registry, "byte-model", 256, std::chrono::milliseconds(100));
    log.wait_for("engine: Avg prompt throughput", std::chrono::milliseconds(500));
    post(h, "/v1/completions", {{"prompt", "abcd"}, {"max_tokens", 8}}, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(550));
  }
  std::vector<std::string> stats;
  for (const std::string& line : log.lines()) {
    if (line.find("engine: Avg prompt") != std::string::npos) stats.push_back(line);
  }
  ASSERT_GE(stats.size(), 5u);
  // Before the request and once idle again: debug. Around it: info, with its tokens, and one
  // idle line after.
  EXPECT_TRUE(stats.front().starts_with("debug: ")) << stats.front();
  EXPECT_TRUE(stats.back().starts_with("debug: ")) << stats.back();
  int info = 0, info_with_tokens = 0;
  for (const std::string& line : stats) {
    if (!line.starts_with("info: ")) continue;
    ++info;
    info_with_tokens += line.find("Avg generation throughput: 0.0 ") == std::string::npos;
  }
  EXPECT_GE(info_with_tokens, 1);
  EXPECT_GE(info, 2);
  EXPECT_LE(info, 4);
}

}  // namespace
}  // namespace nibble::server
