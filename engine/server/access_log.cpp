#include "engine/server/access_log.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "engine/server/generation_session.h"

namespace nibble::server {
namespace {

constexpr std::size_t kMaxFieldBytes = 200;

std::string escaped(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMaxFieldBytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += char(c);
    }
  }
  if (text.size() > kMaxFieldBytes) out += "...";
  return out;
}

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

bool is_probe_or_scrape(const std::string& path) {
  return path == "/health" || path == "/metrics";
}

}  // namespace

std::string format_access_line(const AccessRecord& r) {
  std::string line = fmt::format("access: {} \"{} {}\" {}", r.client.empty() ? "-" : r.client,
                                 escaped(r.method), escaped(r.path), r.status);
  if (!r.model.empty()) line += " model=" + escaped(r.model);
  if (!r.id.empty()) line += " id=" + r.id;
  if (r.prompt_tokens) line += fmt::format(" prompt_tokens={}", *r.prompt_tokens);
  if (r.output_tokens) line += fmt::format(" output_tokens={}", *r.output_tokens);
  if (r.ttft_seconds) line += fmt::format(" ttft_ms={:.1f}", *r.ttft_seconds * 1e3);
  if (r.duration_seconds) line += fmt::format(" duration_ms={:.1f}", *r.duration_seconds * 1e3);
  return line;
}

void AccessLog::install(httplib::Server& server) {
  if (!enabled_) return;
  server.set_logger(
      [this](const httplib::Request& req, const httplib::Response& res) { write(req, res); });
}

std::shared_ptr<RequestFacts> AccessLog::begin(const httplib::Request& req) {
  auto facts = std::make_shared<RequestFacts>();
  if (enabled_) {
    std::lock_guard lock(mutex_);
    in_flight_[&req] = facts;
  }
  return facts;
}

void AccessLog::write(const httplib::Request& req, const httplib::Response& res) {
  const auto now = std::chrono::steady_clock::now();
  std::shared_ptr<RequestFacts> facts;
  {
    std::lock_guard lock(mutex_);
    if (auto it = in_flight_.find(&req); it != in_flight_.end()) {
      facts = std::move(it->second);
      in_flight_.erase(it);
    }
  }
  AccessRecord r;
  r.client = req.remote_addr;
  r.method = req.method;
  r.path = req.path;
  r.status = res.status;
  if (facts) {
    r.model = facts->model;
    r.id = facts->id;
    r.prompt_tokens = facts->prompt_tokens;
    r.duration_seconds = seconds_between(facts->start, now);
    if (const GenerationSession* session = facts->session.get()) {
      const nlohmann::json usage = session->usage();
      r.prompt_tokens = usage["prompt_tokens"].get<int>();
      r.output_tokens = usage["completion_tokens"].get<int>();
      if (session->first_token_time())
        r.ttft_seconds = seconds_between(facts->start, *session->first_token_time());
    }
  }
  const std::string line = format_access_line(r);
  if (is_probe_or_scrape(req.path)) {
    spdlog::debug("{}", line);
  } else {
    spdlog::info("{}", line);
  }
}

}  // namespace nibble::server
