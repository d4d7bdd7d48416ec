#pragma once
// An OpenAiServer on a loopback port over the fake model (next token = last + 1, so with the
// byte-level fixture tokenizer the text after "a" is "bcd..."), for in-process API tests.
// With `scripted_output`, every answer is exactly that text (one byte per token), then EOS;
// `replies` answer by prompt (FakeModelRunner::replies). `chat_template_dir` (a directory with a
// tokenizer_config.json) renders prompts with another template over the same byte tokenizer.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/runtime/engine_loop.h"
#include "engine/server/openai_server.h"
#include "engine/tokenizer/tokenizer.h"
#include "metrics/registry.h"
#include "tests/runtime/fake_model_runner.h"

namespace nibble::server::testing {

inline std::string byte_model_dir() {
  return std::string(NIBBLE_SOURCE_DIR) + "/tests/server/fixtures/byte-model";
}

struct HarnessOptions {
  int kv_blocks = 256;
  int max_queue_len = 64;
  int max_num_seqs = 16;
  int max_model_len = 256;
  std::string api_key;
  bool metrics_require_key = false;
  int http_threads = 32;
  std::size_t max_body_bytes = 1 << 20;
  std::chrono::microseconds step_delay{0};
  std::string scripted_output;
  // (what the prompt must contain, the answer's text)
  std::vector<std::pair<std::vector<std::string>, std::string>> replies;
  std::string chat_template_dir;  // empty: the byte model's
  ChatOutputConfig chat_output;
  bool access_log = true;
};

class ServerHarness {
 public:
  explicit ServerHarness(HarnessOptions o = {})
      : runner(259, o.kv_blocks, 16),
        tokenizer(tokenizer::Tokenizer::from_directory(byte_model_dir())),
        chat_template(chat::load_tokenizer_config(
            o.chat_template_dir.empty() ? byte_model_dir() : o.chat_template_dir)) {
    runner.step_delay = o.step_delay;
    if (!o.scripted_output.empty()) runner.script = scripted_tokens(o.scripted_output);
    for (const auto& [prompt_contains, answer] : o.replies) {
      runner.replies.push_back({prompt_contains, scripted_tokens(answer)});
    }
    runtime::EngineConfig engine_config;
    engine_config.model_name = "byte-model";
    engine_config.max_model_len = o.max_model_len;
    engine_config.max_queue_len = o.max_queue_len;
    engine_config.scheduler = {.max_num_seqs = o.max_num_seqs, .max_num_batched_tokens = 512};
    engine_config.eos_token_ids = {258};
    engine = std::make_unique<runtime::EngineLoop>(engine_config, runner, registry);
    ServerConfig server_config;
    server_config.host = "127.0.0.1";
    server_config.port = 0;
    server_config.served_model_name = "byte-model";
    if (!o.api_key.empty()) server_config.api_keys.add(o.api_key);
    server_config.metrics_require_key = o.metrics_require_key;
    server_config.max_body_bytes = o.max_body_bytes;
    server_config.http_threads = o.http_threads;
    server_config.chat_output = o.chat_output;
    server_config.access_log = o.access_log;
    server =
        std::make_unique<OpenAiServer>(server_config, *engine, tokenizer, &chat_template, registry);
    port = server->bind();
    engine->start();
    server->set_ready(true);
    thread = std::thread([this] { server->listen(); });
  }
  ~ServerHarness() {
    server->stop();
    thread.join();
    engine->drain_and_stop(std::chrono::seconds(1));
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }

  // One byte per token, then <|im_end|> (the EOS).
  static std::vector<int> scripted_tokens(const std::string& text) {
    std::vector<int> tokens;
    for (unsigned char c : text) tokens.push_back(int(c));
    tokens.push_back(258);
    return tokens;
  }

  runtime::testing::FakeModelRunner runner;
  metrics::Registry registry;
  tokenizer::Tokenizer tokenizer;
  chat::ChatTemplate chat_template;
  std::unique_ptr<runtime::EngineLoop> engine;
  std::unique_ptr<OpenAiServer> server;
  int port = 0;
  std::thread thread;
};

using nlohmann::json;  // the helpers below speak JSON

inline json post(ServerHarness& h, const std::string& path, const json& body, int expected_status) {
  auto c = h.client();
  auto res = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(res) << path;
  if (!res) return nullptr;
  EXPECT_EQ(res->status, expected_status) << path << " " << body.dump() << " -> " << res->body;
  return json::parse(res->body, nullptr, false);
}

// Reads an SSE stream; returns the data payloads in order ("[DONE]" included as a string).
inline std::vector<json> stream(ServerHarness& h, const std::string& path, const json& body) {
  auto c = h.client();
  std::string raw;
  httplib::Request req;
  auto res = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(res);
  if (!res) return {};
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  std::vector<json> events;
  std::istringstream lines(res->body);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("data: ")) continue;
    const std::string payload = line.substr(6);
    events.push_back(payload == "[DONE]" ? json("[DONE]") : json::parse(payload));
  }
  return events;
}

}  // namespace nibble::server::testing
