#pragma once
// Turns one run's request results into the numbers `vllm bench serve` reports, prints them as
// a summary block with an ASCII plot of output tokens/s over time, and as JSON.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bench_request.h"
#include "tools/bench/spec_decode_stats.h"

namespace nibble::bench {

struct Distribution {
  double mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0;  // milliseconds
};
Distribution distribution_ms(std::vector<double> seconds);

struct RunSummary {
  int concurrency = 0;
  double request_rate = 0;
  int completed = 0, failed = 0;
  double duration_s = 0;
  long long input_tokens = 0, output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_throughput = 0;
  // Prompt tokens over the time to their first token, summed over requests: how fast one
  // request's prompt goes through (its queueing included), for long-prompt runs.
  double prefill_rate = 0;
  int peak_concurrency = 0;
  Distribution ttft, tpot, itl, e2e;
  double first_ttft = 0;  // seconds: the first request's (dataset order), 0 if it failed
  std::vector<double> output_tokens_per_second;  // over time, for the plot
  double plot_bin_s = 1;
  std::vector<std::string> errors;  // first few
  // What the server's speculative decoding counters say of the run (nullopt: it exports none).
  std::optional<SpecDecodeStats> spec_decode;
};

RunSummary summarize(int concurrency, double request_rate,
                     const std::vector<RequestResult>& results, double duration_s);
std::string format_summary(const RunSummary& s);
nlohmann::json summary_json(const RunSummary& s);

}  // namespace nibble::bench
