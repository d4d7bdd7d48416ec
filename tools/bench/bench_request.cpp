#include "tools/bench/bench_request.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

namespace nibble::bench {
namespace {

using nlohmann::json;

double since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

json request_body(const BenchOptions& o, const BenchPrompt& p) {
  json body = {{"model", o.model},   {"max_tokens", o.output_len},
               {"ignore_eos", true}, {"temperature", 0},
               {"stream", true},     {"stream_options", {{"include_usage", true}}}};
  if (!o.response_format.empty()) {
    body["response_format"] = json::parse(o.response_format);
    body["ignore_eos"] = false;  // the schema decides where the answer ends
  }
  if (o.endpoint == "chat") {
    body["messages"] = json::array({{{"role", "user"}, {"content", p.text}}});
  } else if (p.ids) {
    body["prompt"] = *p.ids;
  } else {
    body["prompt"] = p.text;
  }
  return body;
}

}  // namespace

RequestResult send_request(const BenchOptions& o, const BenchPrompt& prompt,
                           Clock::time_point run_start) {
  RequestResult r;
  httplib::Client client(o.base_url);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(600, 0);
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);

  const Clock::time_point sent = Clock::now();
  r.start = since(run_start, sent);
  std::string buffer;
  bool first = true;
  int status = 0;
  std::string error_body;
  auto on_data = [&](const char* data, std::size_t size) {
    const Clock::time_point now = Clock::now();
    if (status != 200) {
      error_body.append(data, size);
      return true;
    }
    buffer.append(data, size);
    std::size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (!event.starts_with("data: ")) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") continue;
      json chunk = json::parse(payload, nullptr, false);
      if (!chunk.is_object()) continue;
      if (chunk.contains("error")) {
        r.error = chunk["error"].value("message", "stream error");
        continue;
      }
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        r.prompt_tokens = chunk["usage"].value("prompt_tokens", 0);
        r.output_tokens = chunk["usage"].value("completion_tokens", 0);
      }
      if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
      const json& choice = chunk["choices"][0];
      std::string text;
      if (choice.contains("text") && choice["text"].is_string()) text = choice["text"];
      if (choice.contains("delta") && choice["delta"].contains("content") &&
          choice["delta"]["content"].is_string()) {
        text = choice["delta"]["content"];
      }
      if (text.empty()) continue;
      if (first) {
        r.ttft = since(sent, now);
        first = false;
      }
      r.chunk_times.push_back(since(run_start, now));
    }
    return true;
  };
  const std::string path = o.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions";
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.set_header("Content-Type", "application/json");
  req.body = request_body(o, prompt).dump();
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
    return on_data(data, size);
  };
  auto result = client.send(req);
  r.e2e = since(sent, Clock::now());
  if (!result) {
    r.error = "connection failed: " + httplib::to_string(result.error());
  } else if (status != 200) {
    r.error = "HTTP " + std::to_string(status) + ": " + error_body.substr(0, 200);
  } else if (r.error.empty()) {
    r.ok = !first;
    if (first) r.error = "the stream carried no content";
  }
  return r;
}

}  // namespace nibble::bench
