#include "controller/loop/engine_load.h"

#include <httplib.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace nibble::controller {
namespace {

// The sample value of a line `name{labels} value [timestamp]` or `name value`, when the line's
// metric name is exactly `name`.
std::optional<double> sample_of(const std::string& line, const std::string& name) {
  if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size()) return std::nullopt;
  std::size_t at = name.size();
  if (line[at] == '{') {
    // Label values may contain '}' only escaped inside quotes; find the closing brace outside.
    bool quoted = false;
    for (++at; at < line.size(); ++at) {
      if (quoted && line[at] == '\\') {
        ++at;
      } else if (line[at] == '"') {
        quoted = !quoted;
      } else if (!quoted && line[at] == '}') {
        break;
      }
    }
    if (at >= line.size()) return std::nullopt;
    ++at;
  }
  if (at >= line.size() || line[at] != ' ') return std::nullopt;
  const char* begin = line.c_str() + at + 1;
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  return v;
}

}  // namespace

std::optional<EngineLoad> parse_engine_load(const std::string& exposition) {
  EngineLoad load;
  bool found = false;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (auto v = sample_of(line, "nibble_requests_running")) {
      load.running += *v;
      found = true;
    } else if (auto w = sample_of(line, "nibble_requests_waiting")) {
      load.waiting += *w;
      found = true;
    } else if (auto k = sample_of(line, "nibble_kv_cache_usage_ratio")) {
      load.kv_cache_usage = std::max(load.kv_cache_usage, *k);
      found = true;
    }
  }
  if (!found) return std::nullopt;
  return load;
}

std::optional<EngineLoad> scrape_engine_load(const std::string& host, int port,
                                             const std::string& api_key) {
  httplib::Client client(host, port);
  client.set_connection_timeout(0, 300000);
  client.set_read_timeout(1, 0);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  auto res = client.Get("/metrics", headers);
  if (!res || res->status != 200) return std::nullopt;
  return parse_engine_load(res->body);
}

}  // namespace nibble::controller
