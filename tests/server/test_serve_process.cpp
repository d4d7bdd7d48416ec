// `nibble-engine serve` as users run it: a real process, a tiny random model, the real Qwen3
// tokenizer. Load with cancellations and preemption, overload, prefix caching, SIGTERM drain,
// and a real Prometheus scraping it during a benchmark.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>

#include <signal.h>
#include <atomic>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/server/serve_process.h"
#include "tools/bench/bench_runner.h"

namespace nibble::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::ServeProcess;

// Streams one completion; returns the number of content chunks, or -1 on failure.
// cancel_after > 0 hangs up after that many chunks.
struct StreamOutcome {
  int status = 0;
  int chunks = 0;
  std::string finish_reason;
  int completion_tokens = -1;
  std::string error;
};

// cancel_after > 0: hang up after that many chunks. started (may be null): set at the first chunk,
// once the engine runs the request.
StreamOutcome stream_completion(int port, const json& body, int cancel_after = 0,
                                std::atomic<bool>* started = nullptr) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  StreamOutcome out;
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& res) {
    out.status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    buffer.append(data, n);
    std::size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (!event.starts_with("data: {")) continue;
      json chunk = json::parse(event.substr(6), nullptr, false);
      if (chunk.contains("usage") && chunk["usage"].is_object())
        out.completion_tokens = chunk["usage"]["completion_tokens"];
      if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
      ++out.chunks;
      if (started != nullptr) started->store(true);
      if (!chunk["choices"][0]["finish_reason"].is_null())
        out.finish_reason = chunk["choices"][0]["finish_reason"];
      if (cancel_after > 0 && out.chunks >= cancel_after) return false;
    }
    return true;
  };
  auto result = c.send(req);
  if (!result && out.status == 0) out.error = httplib::to_string(result.error());
  return out;
}

TEST(ServeProcess, TwoHundredConcurrentStreamsWithCancellationsAndPreemption) {
  REQUIRE_TINY_MODEL(model);
  // 160 blocks of 16 tokens: far less than 200 sequences of ~60 tokens need.
  ServeProcess serve(model, {"--kv-cache-memory-bytes", std::to_string(160 * 8192),
                             "--max-num-batched-tokens", "512"});
  ASSERT_TRUE(serve.wait_ready()) << serve.process->log();
  std::vector<StreamOutcome> outcomes(200);
  std::vector<std::thread> clients;
  for (int i = 0; i < 200; ++i) {
    clients.emplace_back([&, i] {
      const json body = {{"prompt", "Request number " + std::to_string(i) + " tells a story about"},
                         {"max_tokens", 40},
                         {"ignore_eos", true},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
      outcomes[std::size_t(i)] = stream_completion(serve.port, body, i % 4 == 0 ? 3 : 0);
    });
  }
  for (auto& t : clients) t.join();
  int completed = 0;
  for (int i = 0; i < 200; ++i) {
    const StreamOutcome& o = outcomes[std::size_t(i)];
    EXPECT_EQ(o.status, 200) << i << " " << o.error;
    if (i % 4 == 0) continue;  // hung up on purpose
    EXPECT_EQ(o.finish_reason, "length") << i;
    EXPECT_EQ(o.completion_tokens, 40) << i;
    ++completed;
  }
  EXPECT_EQ(completed, 150);
  ASSERT_TRUE(serve.process->running()) << serve.process->log();
  // Every request is accounted for, and every block came back.
  double finished = 0;
  for (int i = 0; i < 100 && finished < 200; ++i) {
    finished =
        std::max(
            0.0,
            serve.metric("nibble_requests_total{model_name=\"tiny\",finished_reason=\"length\"}")) +
        std::max(0.0, serve.metric(
                          "nibble_requests_total{model_name=\"tiny\",finished_reason=\"abort\"}"));
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(finished, 200);
  EXPECT_EQ(serve.metric("nibble_kv_cache_usage_ratio{model_name=\"tiny\"}"), 0);
  EXPECT_GT(serve.metric("nibble_preemptions_total{model_name=\"tiny\"}"), 0);
  EXPECT_EQ(serve.metric("nibble_requests_running{model_name=\"tiny\"}"), 0);
}

TEST(ServeProcess, OverloadAnswers503AndStaysHealthy) {
  REQUIRE_TINY_MODEL(model);
  ServeProcess serve(model, {"--max-num-seqs", "2", "--max-queue-len", "3"});
  ASSERT_TRUE(serve.wait_ready()) << serve.process->log();
  std::atomic<int> ok{0}, unavailable{0}, retry_after{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 24; ++i) {
    clients.emplace_back([&] {
      auto c = serve.client();
      auto res = c.Post("/v1/completions",
                        json{{"prompt", "x"}, {"max_tokens", 300}, {"ignore_eos", true}}.dump(),
                        "application/json");
      if (!res) return;
      if (res->status == 200) ++ok;
      if (res->status == 503) {
        ++unavailable;
        if (res->get_header_value("Retry-After") == "1") ++retry_after;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_GT(unavailable.load(), 0);
  EXPECT_EQ(retry_after.load(), unavailable.load());
  EXPECT_GE(ok.load(), 3) << "a queue of 3 takes at least the first 3 requests";
  EXPECT_EQ(ok + unavailable, 24);
  EXPECT_EQ(serve.client().Get("/health")->status, 200);
  auto after = serve.client().Post("/v1/completions", R"({"prompt":"x","max_tokens":2})",
                                   "application/json");
  EXPECT_EQ(after->status, 200);
}

// Issue 44, items 1 and 2, against the real binary: each of these requests killed the engine
// (SIGSEGV: a left-recursive schema, 50,000 nested arrays, 20,000 nested regex groups). Each now
// gets a 400 and the same process answers the next request.
TEST(ServeProcess, RequestsThatOverflowedTheStackGet400AndTheEngineLives) {
  REQUIRE_TINY_MODEL(model);
  ServeProcess serve(model, {});
  ASSERT_TRUE(serve.wait_ready()) << serve.process->log();
  const std::string deep = std::string(50000, '[') + std::string(50000, ']');
  const std::pair<const char*, std::string> requests[] = {
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "response_format":
           {"type": "json_schema", "json_schema": {"name": "x", "schema":
           {"anyOf": [{"$ref": "#"}, {"type": "string"}]}}}})"},
      {"/v1/completions",
       R"({"prompt": "a", "max_tokens": 4, "guided_json": {"type": "array", "items":
           {"anyOf": [{"$ref": "#/items"}, {"type": "integer"}]}}})"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}],
           "chat_template_kwargs": {"x": )" +
                                   deep + "}}"},
      {"/v1/completions", R"({"prompt": "a", "guided_regex": ")" + std::string(20000, '(') + "a" +
                              std::string(20000, ')') + R"("})"},
  };
  for (const auto& [path, body] : requests) {
    auto res = serve.client().Post(path, body, "application/json");
    ASSERT_TRUE(res) << path << ": no answer; the engine died?\n" << serve.process->log();
    EXPECT_EQ(res->status, 400) << path << " " << res->body;
  }
  auto after = serve.client().Post("/v1/completions", R"({"prompt":"x","max_tokens":2})",
                                   "application/json");
  ASSERT_TRUE(after) << serve.process->log();
  EXPECT_EQ(after->status, 200);
}

TEST(ServeProcess, RepeatedLongPrefixHitsTheCacheAndCutsTimeToFirstToken) {
  REQUIRE_TINY_MODEL(model);
  ServeProcess serve(model, {});
  ASSERT_TRUE(serve.wait_ready()) << serve.process->log();
  // Three distinct long prompts, each sent cold and then again; medians of three, so one
  // measurement slowed by other work on the machine does not decide the comparison.
  auto prompt_of = [](int variant) {
    std::string prompt = "Variant " + std::to_string(variant) + ". ";
    for (int i = 0; i < 200; ++i) prompt += "The quick brown fox " + std::to_string(i) + ". ";
    return prompt;
  };
  int prompt_tokens = 0;
  auto timed = [&](const std::string& prompt) {
    const auto start = std::chrono::steady_clock::now();
    auto res = serve.client().Post(
        "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 1}}.dump(), "application/json");
    EXPECT_EQ(res->status, 200) << res->body;
    prompt_tokens = json::parse(res->body, nullptr, false)["usage"].value("prompt_tokens", 0);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> cold, warm;
  double hits = 0;
  for (int variant = 0; variant < 3; ++variant) {
    cold.push_back(timed(prompt_of(variant)));
    const double hits_before = serve.metric("nibble_prefix_cache_hits_total{model_name=\"tiny\"}");
    warm.push_back(timed(prompt_of(variant)));
    hits = serve.metric("nibble_prefix_cache_hits_total{model_name=\"tiny\"}") - hits_before;
    EXPECT_GE(hits, prompt_tokens - 32)
        << "the whole prompt but its last block should come from the cache";
  }
  EXPECT_GT(prompt_tokens, 1000);
  const double first = median(cold), second = median(warm);
  EXPECT_LT(second, first / 2) << "median uncached " << first << " s, cached " << second << " s";
  RecordProperty("ttft_uncached_s", std::to_string(first));
  RecordProperty("ttft_cached_s", std::to_string(second));
}

TEST(ServeProcess, SigtermDrainsRunningRequestsAndExitsZero) {
  REQUIRE_TINY_MODEL(model);
  ServeProcess serve(model, {"--drain-timeout", "30"});
  ASSERT_TRUE(serve.wait_ready()) << serve.process->log();
  StreamOutcome outcome;
  std::atomic<bool> started{false};
  std::thread client([&] {
    outcome = stream_completion(
        serve.port,
        {{"prompt", "Hello"}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true}}, 0,
        &started);
  });
  // The signal must find the request running: a fixed delay lost that race on a loaded machine
  // (the request then arrived during the drain and was refused).
  for (int i = 0; i < 1000 && !started.load(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(started.load()) << "no token within 10 s\n" << serve.process->log();
  kill(serve.process->pid(), SIGTERM);
  std::this_thread::sleep_for(100ms);
  auto health = serve.client().Get("/health");
  EXPECT_TRUE(health) << "the server must keep answering while it drains";
  if (health) {
    EXPECT_EQ(health->status, 503) << "a draining engine must fail its health check";
  }
  client.join();  // not before: a fatal assertion above would leave the thread running
  EXPECT_EQ(outcome.finish_reason, "length")
      << "the running request must finish during the drain (status " << outcome.status << ", "
      << outcome.chunks << " chunks, " << outcome.error << ")";
  const int status = serve.process->stop(30s);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << serve.process->log();
}

// The real Qwen3 template shows the hermes format: with --enable-auto-tool-choice alone the
// engine parses tool calls. A random-weight model writes no real call, so this checks the
// answers' shape; tests/server/test_chat_tools.cpp checks their content over a scripted model.
TEST(ServeProcess, ToolsAndReasoningWithTheRealQwen3Template) {
  REQUIRE_TINY_MODEL(model);
  ServeProcess serve(model, {"--enable-auto-tool-choice", "--reasoning-parser", "qwen3"});
  ASSERT_TRUE(serve.wait_ready()) << serve.process->log();
  EXPECT_NE(serve.process->log().find("the chat template uses the hermes format"),
            std::string::npos)
      << serve.process->log();
  // No --max-num-batched-tokens: the CPU backend's default step (serve_options.h).
  EXPECT_NE(serve.process->log().find("sequences, 2048 tokens per step"), std::string::npos)
      << serve.process->log();
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  json body = {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
               {"tools", tools},
               {"max_tokens", 24},
               {"seed", 5}};
  auto res = serve.client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json answer = json::parse(res->body);
  const json& message = answer["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_TRUE(message.contains("reasoning_content")) << message;
  EXPECT_TRUE(message["content"].is_string() || message["content"].is_null()) << message;
  for (const json& call : message.value("tool_calls", json::array())) {
    EXPECT_TRUE(json::accept(call["function"]["arguments"].get<std::string>())) << call;
  }
  const std::string finish = answer["choices"][0]["finish_reason"];
  EXPECT_TRUE(finish == "length" || finish == "stop" || finish == "tool_calls") << finish;
  EXPECT_EQ(answer["usage"]["completion_tokens"].get<int>() <= 24, true);

  body["stream"] = true;
  res = serve.client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_NE(res->body.find("data: [DONE]"), std::string::npos) << res->body;
  EXPECT_EQ(res->body.find("<tool_call>"), std::string::npos) << res->body;

  // tool_choice "none" skips parsing; a named function not in tools is refused.
  body["stream"] = false;
  body["tool_choice"] = "none";
  res = serve.client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  res = serve.client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_NE(
      serve.metric("nibble_tool_call_requests_total{model_name=\"tiny\",tool_choice=\"auto\"}"), -1)
      << serve.metrics();
}

TEST(ServeProcess, PrometheusScrapesTheEngineDuringABenchmark) {
  REQUIRE_TINY_MODEL(model);
  NIBBLE_REQUIRE_TOOL(prometheus, "prometheus");
  ServeProcess serve(model, {});
  ASSERT_TRUE(serve.wait_ready()) << serve.process->log();
  nibble::testing::TempDir dir;
  std::ofstream(dir.path() / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: nibble\n"
      << "    static_configs:\n      - targets: ['127.0.0.1:" << serve.port << "']\n";
  const int prom_port = nibble::testing::pick_free_port();
  nibble::testing::ChildProcess prom(
      {prometheus, "--config.file=" + (dir.path() / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir.path() / "data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"},
      (dir.path() / "prometheus.log").string());
  httplib::Client pc("127.0.0.1", prom_port);
  auto query = [&](const std::string& q) {
    auto res = pc.Get("/api/v1/query", httplib::Params{{"query", q}}, {});
    if (!res || res->status != 200) return json::array();
    json body = json::parse(res->body, nullptr, false);
    return body.is_object() ? body["data"]["result"] : json::array();
  };
  // The first value of a query result, NaN when there is none.
  auto first_value = [](const json& result) {
    if (result.empty()) return std::nan("");
    return std::stod(result[0]["value"][1].get<std::string>());
  };
  // The benchmark must run while Prometheus scrapes: on a loaded machine Prometheus took longer
  // to start than the benchmark ran, every scrape saw the finished counters, and the rates were
  // 0 (the quantile NaN).
  double up = std::nan("");
  for (int i = 0; i < 240 && !(up == 1.0); ++i) {
    up = first_value(query("up{job=\"nibble\"}"));
    if (!(up == 1.0)) std::this_thread::sleep_for(250ms);
  }
  ASSERT_EQ(up, 1.0) << "Prometheus never scraped the engine\n" << prom.log();
  bench::BenchOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(serve.port);
  o.model = "tiny";
  o.input_len = 32;
  o.output_len = 32;
  o.num_prompts = 40;
  o.progress = false;
  const bench::Dataset dataset = bench::make_dataset(o);
  const auto bench_start = std::chrono::steady_clock::now();
  int runs = 0;
  while (std::chrono::steady_clock::now() - bench_start < 6s || runs == 0) {
    EXPECT_EQ(bench::run_benchmark(o, dataset, 4).failed, 0);
    ++runs;
  }
  double ttft = std::nan(""), rate = std::nan("");
  for (int i = 0; i < 120 && !(ttft > 0.0 && rate > 0.0); ++i) {
    ttft =
        first_value(query("histogram_quantile(0.9, sum by (le) "
                          "(rate(nibble_time_to_first_token_seconds_bucket[1m])))"));
    rate = first_value(query("sum(rate(nibble_generation_tokens_total[1m]))"));
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_GT(ttft, 0.0) << "p90 time to first token over the benchmark\n" << prom.log();
  EXPECT_GT(rate, 0.0) << "generated tokens per second over the benchmark\n" << prom.log();
}

// Issue 42: the draft_model method, the tiny model drafting for itself (same vocabulary): serve
// loads it, answers, and the speculative decoding counters move; a draft model that cannot be
// loaded stops serve at start-up.
TEST(ServeProcess, DraftModelSpeculationServesACompletion) {
  REQUIRE_TINY_MODEL(model);
  const std::string config =
      json{{"method", "draft_model"}, {"model", model}, {"num_speculative_tokens", 3}}.dump();
  ServeProcess serve(model, {"--speculative-config", config, "--max-num-seqs", "4"});
  ASSERT_TRUE(serve.wait_ready()) << serve.process->log();
  EXPECT_NE(serve.log().find("draft model: "), std::string::npos) << serve.log();
  auto res =
      serve.client().Post("/v1/completions",
                          json{{"prompt", "Once upon a time"},
                               {"max_tokens", 24},
                               {"ignore_eos", true},
                               {"temperature", 0}}  // greedy: the draft's tokens are the target's
                              .dump(),
                          "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["usage"]["completion_tokens"], 24);
  const double drafted =
      serve.metric("nibble_spec_decode_num_draft_tokens_total{model_name=\"tiny\"}");
  const double accepted =
      serve.metric("nibble_spec_decode_num_accepted_tokens_total{model_name=\"tiny\"}");
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0) << "the target drafting for itself";

  ServeProcess missing(model, {"--speculative-config",
                               json{{"method", "draft_model"},
                                    {"model", (serve.log_dir.path() / "no-such-model").string()},
                                    {"num_speculative_tokens", 3}}
                                   .dump()});
  EXPECT_FALSE(missing.wait_ready(30s));
  const int status = missing.process->stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status << missing.log();
  EXPECT_NE(missing.log().find("no-such-model"), std::string::npos) << missing.log();
}

}  // namespace
}  // namespace nibble::server
