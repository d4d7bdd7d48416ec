// The OpenAI API end to end over HTTP, against the fake model and the byte-level tokenizer:
// with prompt "a", the model generates "bcdef...".
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/server/server_harness.h"
#include "tests/support/slow_clients.h"

namespace nibble::server {
namespace {

using nlohmann::json;
using testing::HarnessOptions;
using testing::post;
using testing::ServerHarness;
using testing::stream;

TEST(OpenAiServer, ModelsHealthVersionMetrics) {
  ServerHarness h;
  auto c = h.client();
  auto models = json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "byte-model");
  EXPECT_EQ(models["data"][0]["max_model_len"], 256);
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_TRUE(json::parse(c.Get("/version")->body).contains("version"));
  auto metrics = c.Get("/metrics");
  EXPECT_NE(metrics->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  EXPECT_NE(metrics->body.find("nibble_kv_cache_usage_ratio"), std::string::npos);
  h.server->set_ready(false);
  EXPECT_EQ(c.Get("/health")->status, 503);
}

TEST(OpenAiServer, CompletionWithUsageAndFinishReason) {
  ServerHarness h;
  json r =
      post(h, "/v1/completions",
           {{"model", "byte-model"}, {"prompt", "a"}, {"max_tokens", 4}, {"temperature", 0}}, 200);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "bcde");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 1);
  EXPECT_EQ(r["usage"]["completion_tokens"], 4);
  EXPECT_EQ(r["usage"]["total_tokens"], 5);
}

// Two engines started in the same second (two replicas behind the router) give different ids:
// the ids were the start time and a counter, so both answered chatcmpl-<time>-0 (issue 45).
TEST(OpenAiServer, ResponseIdsDifferAcrossServers) {
  ServerHarness a, b;
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  const json first = post(a, "/v1/chat/completions", body, 200);
  const json second = post(b, "/v1/chat/completions", body, 200);
  const json again = post(a, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}}, 200);
  ASSERT_TRUE(first.contains("id") && second.contains("id") && again.contains("id"));
  EXPECT_NE(first["id"], second["id"]);
  EXPECT_EQ(first["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(again["id"].get<std::string>().rfind("cmpl-", 0), 0u);
}

TEST(OpenAiServer, StopStringsAcrossTokensAreNotEmitted) {
  ServerHarness h;
  json r = post(h, "/v1/completions",
                {{"prompt", "a"}, {"max_tokens", 20}, {"stop", {"xyz", "ef"}}}, 200);
  EXPECT_EQ(r["choices"][0]["text"], "bcd");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  json s = post(h, "/v1/completions",
                {{"prompt", "a"}, {"max_tokens", 20}, {"stop_token_ids", {100}}}, 200);
  EXPECT_EQ(s["choices"][0]["text"], "bc");  // token 100 ('d') stops and is not text
  EXPECT_EQ(s["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(s["usage"]["completion_tokens"], 3);
}

// Issue 45: OpenAI's text_offset counts characters; it counted bytes. "é€a" is 6 tokens of one
// byte each here: é is held back until its second byte, € until its third.
TEST(OpenAiServer, TextOffsetCountsCharactersNotBytes) {
  ServerHarness h({.scripted_output = "\xc3\xa9\xe2\x82\xac"
                                      "a"});
  const json r =
      post(h, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 10}, {"logprobs", 0}}, 200);
  EXPECT_EQ(r["choices"][0]["text"],
            "\xc3\xa9\xe2\x82\xac"
            "a");
  EXPECT_EQ(r["choices"][0]["logprobs"]["text_offset"], json({0, 0, 1, 1, 1, 2}));
}

TEST(OpenAiServer, EchoAndLogprobs) {
  ServerHarness h;
  json r = post(h, "/v1/completions",
                {{"prompt", "a"}, {"max_tokens", 2}, {"echo", true}, {"logprobs", 2}}, 200);
  EXPECT_EQ(r["choices"][0]["text"], "abc");
  const json& lp = r["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"b", "c"}));
  EXPECT_EQ(lp["text_offset"], json({0, 1}));
  // The fake model puts all its mass on the next byte: logprob ~0, the runner-up ~-100.
  EXPECT_NEAR(lp["token_logprobs"][0].get<double>(), 0.0, 1e-6);
  double runner_up = 0;
  for (const auto& [token, logprob] : lp["top_logprobs"][0].items()) {
    if (token != "b") runner_up = logprob.get<double>();
  }
  EXPECT_LT(runner_up, -90.0);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
}

TEST(OpenAiServer, StreamingMatchesNonStreamingAndEndsWithUsageAndDone) {
  ServerHarness h;
  auto events = stream(h, "/v1/completions",
                       {{"prompt", "a"},
                        {"max_tokens", 5},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}}});
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json& usage_chunk = events[events.size() - 2];
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 5);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  std::string text;
  std::string finish;
  for (std::size_t i = 0; i + 2 < events.size(); ++i) {
    text += events[i]["choices"][0]["text"].get<std::string>();
    if (!events[i]["choices"][0]["finish_reason"].is_null())
      finish = events[i]["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "bcdef");
  EXPECT_EQ(finish, "length");
}

TEST(OpenAiServer, ChatUsesTheTemplateAndStreamsDeltas) {
  ServerHarness h;
  // The prompt ends "<|im_start|>assistant\n", so generation starts at byte 11.
  json r = post(h, "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}}, 200);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "\x0b\x0c\r");
  // <|im_start|> user \n h i <|im_end|> \n <|im_start|> a s s i s t a n t \n
  EXPECT_EQ(r["usage"]["prompt_tokens"], 1 + 4 + 1 + 2 + 1 + 1 + 1 + 9 + 1);

  auto events = stream(
      h, "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}, {"stream", true}});
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events.front()["object"], "chat.completion.chunk");
  std::string content;
  for (const json& e : events) {
    if (e.is_string()) continue;
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, "\x0b\x0c\r");
}

TEST(OpenAiServer, SeededSamplingIsReproducibleAndNChoicesDiffer) {
  ServerHarness h;
  const json body = {
      {"prompt", "a"}, {"max_tokens", 8}, {"temperature", 2.0}, {"seed", 42}, {"n", 3}};
  json a = post(h, "/v1/completions", body, 200);
  json b = post(h, "/v1/completions", body, 200);
  ASSERT_EQ(a["choices"].size(), 3u);
  EXPECT_EQ(a["choices"], b["choices"]);
  EXPECT_EQ(a["usage"]["completion_tokens"], 24);
}

TEST(OpenAiServer, TokenizeAndDetokenize) {
  ServerHarness h;
  json t = post(h, "/tokenize", {{"prompt", "hi"}}, 200);
  EXPECT_EQ(t["tokens"], json({104, 105}));
  json d = post(h, "/detokenize", {{"tokens", {104, 105}}}, 200);
  EXPECT_EQ(d["prompt"], "hi");
  post(h, "/detokenize", {{"tokens", "nope"}}, 400);
}

struct ErrorCase {
  std::string path;
  std::string body;
  int status;
  std::string message_part;
};

TEST(OpenAiServer, BadInputGetsOpenAiErrorsWithTheRightStatus) {
  ServerHarness h({.max_model_len = 64, .max_body_bytes = 4096});
  const ErrorCase cases[] = {
      {"/v1/completions", "{not json", 400, "not valid JSON"},
      {"/v1/completions", R"({"prompt": 1})", 400, "prompt"},
      {"/v1/completions", R"({"prompt": "a", "temperature": 9})", 400, "temperature"},
      {"/v1/completions", R"({"prompt": "a", "model": "other"})", 404, "other"},
      {"/v1/completions", R"({"prompt": [300]})", 400, "vocabulary"},
      {"/v1/completions", R"({"prompt": ")" + std::string(80, 'x') + R"("})", 400, "80 tokens"},
      {"/v1/completions", R"({"prompt": "a", "max_tokens": 100})", 400, "101 tokens"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "messages"},
      {"/v1/completions", R"({"prompt": ")" + std::string(5000, 'x') + R"("})", 413, "limit"},
      {"/v1/nope", "{}", 404, "no such route"},
  };
  for (const ErrorCase& c : cases) {
    auto client = h.client();
    auto res = client.Post(c.path, c.body, "application/json");
    ASSERT_TRUE(res) << c.path;
    EXPECT_EQ(res->status, c.status) << c.body.substr(0, 80) << " -> " << res->body;
    json body = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(body.is_object() && body.contains("error")) << res->body;
    EXPECT_NE(body["error"]["message"].get<std::string>().find(c.message_part), std::string::npos)
        << body.dump();
  }
  // The engine is still healthy and serving.
  post(h, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 1}}, 200);
}

TEST(OpenAiServer, ApiKeyIsRequiredOnV1Routes) {
  ServerHarness h({.api_key = "sekret"});
  auto c = h.client();
  auto missing = c.Post("/v1/completions", R"({"prompt":"a"})", "application/json");
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(json::parse(missing->body)["error"]["type"], "authentication_error");
  httplib::Headers wrong = {{"Authorization", "Bearer nope"}};
  EXPECT_EQ(c.Post("/v1/completions", wrong, R"({"prompt":"a"})", "application/json")->status, 401);
  httplib::Headers right = {{"Authorization", "Bearer sekret"}};
  EXPECT_EQ(c.Post("/v1/completions", right, R"({"prompt":"a","max_tokens":1})", "application/json")
                ->status,
            200);
  EXPECT_EQ(c.Get("/health")->status, 200);  // probes need no key
}

TEST(OpenAiServer, ApiKeyProtectsTokenizeAndDetokenizeAndAcceptsAnySchemeCase) {
  ServerHarness h({.api_key = "sekret"});
  auto c = h.client();
  for (const char* path : {"/tokenize", "/detokenize"}) {
    auto res = c.Post(path, R"({"prompt":"a","tokens":[98]})", "application/json");
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 401) << path;
    EXPECT_EQ(json::parse(res->body)["error"]["code"], "invalid_api_key");
  }
  httplib::Headers lower = {{"Authorization", "bearer sekret"}};
  auto tokens = c.Post("/tokenize", lower, R"({"prompt":"ab"})", "application/json");
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->status, 200) << tokens->body;
  EXPECT_EQ(json::parse(tokens->body)["count"], 2);
  EXPECT_EQ(c.Post("/v1/completions", lower, R"({"prompt":"a","max_tokens":1})", "application/json")
                ->status,
            200);
  EXPECT_EQ(c.Get("/metrics")->status, 200);  // Prometheus scrapes without a key by default
  EXPECT_EQ(c.Get("/v1/models")->status, 401);

  ServerHarness guarded({.api_key = "sekret", .metrics_require_key = true});
  auto g = guarded.client();
  EXPECT_EQ(g.Get("/metrics")->status, 401);
  EXPECT_EQ(g.Get("/metrics", lower)->status, 200);
  EXPECT_EQ(g.Get("/health")->status, 200);
}

TEST(OpenAiServer, TokenizeHasTheBodyLimitAndWritesNeedJson) {
  ServerHarness h({.max_body_bytes = 4096});
  auto c = h.client();
  auto big =
      c.Post("/tokenize", json{{"prompt", std::string(5000, 'x')}}.dump(), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  auto text = c.Post("/v1/completions", R"({"prompt":"a"})", "text/plain");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 415);
  auto foreign = c.Post("/v1/completions", {{"Origin", "http://evil.example"}}, R"({"prompt":"a"})",
                        "application/json");
  EXPECT_EQ(foreign->status, 403);
}

TEST(OpenAiServer, TokenizeAndDetokenizeHaveThePromptLimit) {
  ServerHarness h({.max_model_len = 64});  // byte tokenizer: one token per byte
  json fits = post(h, "/tokenize", {{"prompt", std::string(63, 'a')}}, 200);
  EXPECT_EQ(fits["count"], 63);
  json over = post(h, "/tokenize", {{"prompt", std::string(64, 'a')}}, 400);
  EXPECT_NE(over["error"]["message"].get<std::string>().find("maximum context length is 64"),
            std::string::npos)
      << over.dump();
  EXPECT_EQ(over["error"]["param"], "prompt");
  json detok = post(h, "/detokenize", {{"tokens", std::vector<int>(64, 97)}}, 400);
  EXPECT_EQ(detok["error"]["param"], "tokens");
  post(h, "/detokenize", {{"tokens", std::vector<int>(63, 97)}}, 200);
}

TEST(OpenAiServer, SlowlorisOfTwiceTheWorkersLeavesHealthAnswering) {
  ServerHarness h({.http_threads = 4});
  nibble::testing::SlowClients slow(h.port, 8);
  ASSERT_EQ(slow.connected(), 8);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto health = nibble::testing::timed_get(h.port, "/health", std::chrono::seconds(2));
  EXPECT_EQ(health.status, 200);
  EXPECT_LT(health.took, std::chrono::seconds(2));
}

TEST(OpenAiServer, NonStreamedClientDisconnectAbortsWithinASecond) {
  ServerHarness h({.step_delay = std::chrono::milliseconds(5)});
  {
    auto c = h.client();
    c.set_read_timeout(0, 300'000);  // the client gives up after 0.3 s
    auto res = c.Post("/v1/completions",
                      json{{"prompt", "a"}, {"max_tokens", 200}, {"ignore_eos", true}}.dump(),
                      "application/json");
    EXPECT_FALSE(res);
  }
  const auto left = std::chrono::steady_clock::now();
  const std::string aborted =
      "nibble_requests_total{model_name=\"byte-model\",finished_reason=\"abort\"} 1";
  std::string metrics;
  while (std::chrono::steady_clock::now() - left < std::chrono::seconds(3)) {
    metrics = h.registry.render();
    if (metrics.find(aborted) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - left, std::chrono::seconds(1)) << metrics;
  EXPECT_NE(metrics.find(aborted), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("finished_reason=\"length\"} 1"), std::string::npos);
  EXPECT_LT(h.runner.steps.load(), 150) << "the engine kept generating for a client that left";
}

TEST(OpenAiServer, FullQueueAnswers503WithRetryAfter) {
  ServerHarness h(
      {.max_queue_len = 1, .max_num_seqs = 1, .step_delay = std::chrono::milliseconds(50)});
  // One request runs (30 steps of 50 ms), one waits; a third finds the queue full. The pauses
  // between them are a fifth of the first request's run time, so a slow machine keeps the order.
  std::thread running([&] {
    post(h, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 30}, {"ignore_eos", true}}, 200);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::thread waiting([&] {
    post(h, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}}, 200);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto c = h.client();
  auto res = c.Post("/v1/completions", R"({"prompt":"a","max_tokens":1})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  running.join();
  waiting.join();
  post(h, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 1}}, 200);  // healthy again
}

TEST(OpenAiServer, ClientDisconnectMidStreamAbortsAndFreesBlocks) {
  ServerHarness h({.step_delay = std::chrono::milliseconds(5)});
  {
    auto c = h.client();
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body =
        json{{"prompt", "a"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, std::size_t, std::uint64_t, std::uint64_t) {
      return ++chunks < 3;  // hang up after a few chunks
    };
    c.send(req);
    EXPECT_EQ(chunks, 3);
  }
  const std::string aborted =
      "nibble_requests_total{model_name=\"byte-model\",finished_reason=\"abort\"} 1";
  std::string metrics;
  for (int i = 0; i < 100; ++i) {
    metrics = h.registry.render();
    if (metrics.find(aborted) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(metrics.find(aborted), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("nibble_kv_cache_usage_ratio{model_name=\"byte-model\"} 0\n"),
            std::string::npos);
  EXPECT_LT(h.runner.steps.load(), 150) << "the engine kept generating for a client that left";
}

}  // namespace
}  // namespace nibble::server

namespace nibble::server {
namespace {

// Issue 23, items 6 and 9: parts, roles and included stop strings through the whole server.
TEST(OpenAiServer, ChatContentPartsRenderAsTheirJoinedText) {
  ServerHarness h;
  const json parts = {
      {"messages",
       {{{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "h"}}, {{"type", "text"}, {"text", "i"}}}}}}},
      {"max_tokens", 3}};
  const json joined = {{"messages", {{{"role", "user"}, {"content", "h\ni"}}}}, {"max_tokens", 3}};
  const json a = post(h, "/v1/chat/completions", parts, 200);
  const json b = post(h, "/v1/chat/completions", joined, 200);
  EXPECT_EQ(a["usage"]["prompt_tokens"], b["usage"]["prompt_tokens"]);
  EXPECT_EQ(a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"]);
  EXPECT_EQ(post(h, "/tokenize", {{"messages", parts["messages"]}}, 200)["tokens"],
            post(h, "/tokenize", {{"messages", joined["messages"]}}, 200)["tokens"]);

  const json image = post(
      h, "/v1/chat/completions",
      {{"messages",
        {{{"role", "user"},
          {"content", {{{"type", "image_url"}, {"image_url", {{"url", "http://x/y.png"}}}}}}}}}},
      400);
  EXPECT_EQ(image["error"]["param"], "messages");
  EXPECT_NE(image["error"]["message"].get<std::string>().find("'image_url' are not supported"),
            std::string::npos)
      << image;
}

TEST(OpenAiServer, UnknownChatRolesAreRefusedAndDeveloperIsASystemMessage) {
  ServerHarness h;
  const json wizard = post(
      h, "/v1/chat/completions",
      {{"messages",
        {{{"role", "user"}, {"content", "hi"}}, {{"role", "wizard"}, {"content", "abracadabra"}}}}},
      400);
  EXPECT_NE(wizard["error"]["message"].get<std::string>().find("messages[1].role 'wizard'"),
            std::string::npos)
      << wizard;
  post(h, "/tokenize", {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, 400);
  // The fixture's template does not name 'developer': it renders as 'system'.
  EXPECT_EQ(post(h, "/tokenize", {{"messages", {{{"role", "developer"}, {"content", "x"}}}}},
                 200)["tokens"],
            post(h, "/tokenize", {{"messages", {{{"role", "system"}, {"content", "x"}}}}},
                 200)["tokens"]);
}

TEST(OpenAiServer, IncludeStopStrInOutputKeepsTheMatchStreamedAndNot) {
  ServerHarness h;
  const json body = {{"prompt", "a"},
                     {"max_tokens", 20},
                     {"stop", {"xyz", "ef"}},
                     {"include_stop_str_in_output", true}};
  const json r = post(h, "/v1/completions", body, 200);
  EXPECT_EQ(r["choices"][0]["text"], "bcdef");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  json streamed_body = body;
  streamed_body["stream"] = true;
  std::string text;
  for (const json& e : stream(h, "/v1/completions", streamed_body)) {
    if (!e.is_string()) text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "bcdef");
  const json chat = post(h, "/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                          {"max_tokens", 8},
                          {"stop", {"\r"}},
                          {"include_stop_str_in_output", true}},
                         200);
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "\x0b\x0c\r");
}

TEST(OpenAiServer, HugeMaxTokensIsReportedAsSent) {
  ServerHarness h;
  auto c = h.client();
  auto res =
      c.Post("/v1/completions", R"({"prompt": "a", "max_tokens": 1e20})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["message"],
            "'max_tokens' must be between 1 and 2147483647, got 1e+20");
}

// docs/structured-outputs.md quotes these two refusals; they must read as the docs show them.
TEST(OpenAiServer, StructuredOutputRefusalsReadAsTheDocsQuoteThem) {
  ServerHarness h;
  auto refusal = [&](const json& schema) {
    const json answer =
        post(h, "/v1/chat/completions",
             {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
              {"response_format",
               {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}},
             400);
    return answer["error"]["message"].get<std::string>();
  };
  EXPECT_EQ(refusal(json::parse(
                R"({"type": "object", "properties": {"age": {"oneOf": [{"type": "integer"}]}}})")),
            "JSON Schema keyword 'oneOf' is not supported for structured outputs (at "
            "/properties/age)");
  EXPECT_EQ(refusal(json::parse(R"({"anyOf": [{"$ref": "#"}, {"type": "string"}]})")),
            "the grammar is left-recursive: it can come back to the same rule without consuming "
            "input ('ref #' -> 'anyOf' -> 'ref #'); a '$ref' or 'anyOf' option that refers back "
            "to its own schema must sit inside an object property or an array item");
}

}  // namespace
}  // namespace nibble::server
