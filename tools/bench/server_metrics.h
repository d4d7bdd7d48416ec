#pragma once
// Reading the server's Prometheus /metrics text: the scrape itself and the samples of one
// metric, for numbers the client cannot see (grammar compiles, speculative decoding).
#include <sstream>
#include <string>

#include "tools/bench/bench_options.h"

namespace nibble::bench {

// The server's /metrics text ("" when it does not answer).
std::string scrape_metrics(const BenchOptions& o);

// Calls fn(line, value) for every sample line of metric `name` (any labels).
template <class Fn>
void for_each_sample(const std::string& text, const std::string& name, Fn fn) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : ' ';
    if (next != '{' && next != ' ') continue;
    fn(line, std::stod(line.substr(line.rfind(' ') + 1)));
  }
}

// The sum of a metric's series (0 when absent).
double series_sum(const std::string& text, const std::string& name);

// Whether the text has any sample of the metric.
bool has_series(const std::string& text, const std::string& name);

}  // namespace nibble::bench
