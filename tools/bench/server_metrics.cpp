#include "tools/bench/server_metrics.h"

#include <httplib.h>

namespace nibble::bench {

std::string scrape_metrics(const BenchOptions& o) {
  httplib::Client client(o.base_url);
  client.set_connection_timeout(5, 0);
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  auto res = client.Get("/metrics", headers);
  return res && res->status == 200 ? res->body : "";
}

double series_sum(const std::string& text, const std::string& name) {
  double sum = 0;
  for_each_sample(text, name, [&sum](const std::string&, double v) { sum += v; });
  return sum;
}

bool has_series(const std::string& text, const std::string& name) {
  bool found = false;
  for_each_sample(text, name, [&found](const std::string&, double) { found = true; });
  return found;
}

}  // namespace nibble::bench
