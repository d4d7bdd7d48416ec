#pragma once
// An OpenAiServer on a loopback port over the fake model (next token = last + 1, so with the
// byte-level fixture tokenizer the text after "a" is "bcd..."), for in-process API tests.
#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

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
};

class ServerHarness {
 public:
  explicit ServerHarness(HarnessOptions o = {})
      : runner(259, o.kv_blocks, 16),
        tokenizer(tokenizer::Tokenizer::from_directory(byte_model_dir())),
        chat_template(chat::load_tokenizer_config(byte_model_dir())) {
    runner.step_delay = o.step_delay;
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

  runtime::testing::FakeModelRunner runner;
  metrics::Registry registry;
  tokenizer::Tokenizer tokenizer;
  chat::ChatTemplate chat_template;
  std::unique_ptr<runtime::EngineLoop> engine;
  std::unique_ptr<OpenAiServer> server;
  int port = 0;
  std::thread thread;
};

}  // namespace nibble::server::testing
