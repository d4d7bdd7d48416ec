#pragma once
// The engine's access log (serve --access-log, on by default): one line per answered request,
// written by httplib's logger after the response's last byte (a stream's too), e.g.
//   access: 127.0.0.1 "POST /v1/chat/completions" 200 model=qwen3 id=chatcmpl-... prompt_tokens=12
//   output_tokens=30 ttft_ms=41.2 duration_ms=512.3
// It holds counts and times only, never prompt or output text. Fields a request did not reach
// are left out (a 401 has no model, /version no tokens); duration_ms is measured from the
// engine's handler, so a request the HTTP layer refused before routing has none. Probes and
// scrapes (/health, /metrics) log at debug so that they do not drown the requests; every other
// line at info.
#include <httplib.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace nibble::server {

class GenerationSession;

struct AccessRecord {
  std::string client;  // the peer's address
  std::string method;
  std::string path;  // without the query string
  int status = 0;
  std::string model;  // the model the request named (or the served one); "" before parsing
  std::string id;     // the response id (chatcmpl-..., cmpl-...)
  std::optional<int> prompt_tokens;
  std::optional<int> output_tokens;  // all n choices together
  std::optional<double> ttft_seconds;
  std::optional<double> duration_seconds;
};

// The line, with client-sent text (path, model) escaped: control bytes, quotes and backslashes
// as \xNN, so a request cannot forge log lines; each such field cut at 200 bytes.
std::string format_access_line(const AccessRecord& record);

// What a handler learns about its request while it runs; read once the response is written.
struct RequestFacts {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::string model;
  std::string id;
  std::optional<int> prompt_tokens;  // known before a session exists (a refused prompt)
  // The request's generation, once submitted: tokens and the first token's time come from it.
  std::shared_ptr<const GenerationSession> session;
};

class AccessLog {
 public:
  explicit AccessLog(bool enabled) : enabled_(enabled) {}

  // Installs the logger on the server (nothing when disabled). Call before serving.
  void install(httplib::Server& server);
  // A handler's facts for this request, kept until its response has been written. Handlers run
  // on the worker thread that writes their response, so the request's address identifies it.
  std::shared_ptr<RequestFacts> begin(const httplib::Request& req);

 private:
  void write(const httplib::Request& req, const httplib::Response& res);

  bool enabled_;
  std::mutex mutex_;
  std::map<const httplib::Request*, std::shared_ptr<RequestFacts>> in_flight_;
};

}  // namespace nibble::server
