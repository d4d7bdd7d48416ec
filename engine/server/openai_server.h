#pragma once
// The OpenAI-compatible HTTP API in front of one EngineLoop:
//   GET  /v1/models, /health, /metrics, /version
//   POST /v1/completions, /v1/chat/completions (JSON or SSE streams), /tokenize, /detokenize
// HTTP threads parse, tokenize and stream; the engine thread does everything else. With API
// keys, every path but /health, /version and /metrics needs one (/metrics too with
// metrics_require_key); timeouts, guards and limits are the HTTP layer's (http/server.h).
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/chat/chat_template.h"
#include "engine/runtime/engine_loop.h"
#include "engine/server/access_log.h"
#include "engine/server/chat_output.h"
#include "engine/server/openai_request.h"
#include "engine/structured/grammar_cache.h"
#include "engine/tokenizer/tokenizer.h"
#include "http/responses_in_flight.h"
#include "http/server.h"
#include "metrics/registry.h"

namespace nibble::server {

struct PreparedRequest;
enum class Endpoint;

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  http::ApiKeys api_keys;                      // empty: no authentication
  bool metrics_require_key = false;            // else /metrics stays open for Prometheus
  std::size_t max_body_bytes = 32u << 20;      // larger bodies get 413
  int http_threads = 256;                      // each open stream holds one
  std::chrono::seconds read_timeout{5};        // a client silent this long mid-request is dropped
  int max_pending_connections_per_client = 0;  // 0: a quarter of http_threads
  std::vector<std::string> allowed_origins;    // CORS allow-list (http/cors.h); empty: none
  RequestLimits limits;
  ChatOutputConfig chat_output;              // tool-call and reasoning parsing
  structured::StructuredOptions structured;  // grammar limits and caches (structured outputs)
  bool access_log = true;                    // a line per request (access_log.h)
};

class OpenAiServer {
 public:
  // chat_template may be null (a model without one): chat requests then get a 400.
  OpenAiServer(ServerConfig config, runtime::EngineLoop& engine,
               const tokenizer::Tokenizer& tokenizer, const chat::ChatTemplate* chat_template,
               metrics::Registry& registry);

  // Binds; returns the bound port (useful with port 0) or throws on failure.
  int bind();
  void listen();  // blocks until stop()
  void stop() { http_.stop(); }
  // Waits until every streamed response has been written, or the deadline: stop() ends streams
  // between two chunks, so a drain calls this after the engine's drain. True when none is left.
  bool wait_for_streams(std::chrono::steady_clock::time_point deadline) const {
    return streams_.wait_idle(deadline);
  }
  int streams_in_flight() const { return streams_.count(); }
  std::uint64_t yielded_connections() const { return http_.yielded_connections(); }
  // /health answers 200 only when ready (model loaded) and the engine accepts work.
  void set_ready(bool ready) { ready_ = ready; }
  // Builds the structured-output vocabulary (a byte trie of every token: ~0.1-0.2 s for a 150k
  // vocabulary) on a background thread, so that the first request with a schema does not wait
  // for it; a request that comes sooner waits for the same build.
  void prepare_structured_outputs_in_background();

 private:
  void route();
  void completions(const httplib::Request& req, httplib::Response& res, RequestFacts& facts);
  void chat_completions(const httplib::Request& req, httplib::Response& res, RequestFacts& facts);
  template <typename Parsed>
  PreparedRequest prepare(Endpoint endpoint, const Parsed& parsed, RequestFacts& facts);
  // The compiled grammar for the request's structured output fields, or null without them.
  std::shared_ptr<const structured::TokenConstraintFactory> output_constraint(
      const httplib::Request& req, const nlohmann::json& body, bool chat);
  structured::GrammarCache& grammar_cache();

  ServerConfig config_;
  runtime::EngineLoop& engine_;
  const tokenizer::Tokenizer& tokenizer_;
  const chat::ChatTemplate* chat_template_;
  metrics::Registry& registry_;
  http::Server http_;
  AccessLog access_log_;
  http::ResponsesInFlight streams_;  // streamed responses still being written
  std::atomic<bool> ready_{false};
  std::int64_t created_ = 0;
  std::shared_ptr<ToolCallMetrics> tool_metrics_;
  std::once_flag grammar_cache_once_;  // built in the background at start-up, or by a request
  std::unique_ptr<structured::GrammarCache> grammar_cache_;
  metrics::CounterFamily& structured_requests_;
  metrics::Histogram& grammar_compile_time_;
  std::jthread structured_warmup_;  // last: joined before the members it uses go
};

}  // namespace nibble::server
