#include "tools/bench/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace nibble::bench {

Distribution distribution_ms(std::vector<double> seconds) {
  Distribution d;
  if (seconds.empty()) return d;
  std::sort(seconds.begin(), seconds.end());
  d.mean = 1000 * std::accumulate(seconds.begin(), seconds.end(), 0.0) / double(seconds.size());
  const auto at = [&](double q) {  // linear interpolation between closest ranks, as numpy does
    const double pos = q * double(seconds.size() - 1);
    const std::size_t lo = std::size_t(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, seconds.size() - 1);
    return 1000 * (seconds[lo] + (seconds[hi] - seconds[lo]) * (pos - double(lo)));
  };
  d.median = at(0.5);
  d.p90 = at(0.90);
  d.p95 = at(0.95);
  d.p99 = at(0.99);
  return d;
}

RunSummary summarize(int concurrency, double request_rate,
                     const std::vector<RequestResult>& results, double duration_s) {
  RunSummary s;
  s.concurrency = concurrency;
  s.request_rate = request_rate;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  double ttft_sum = 0;
  std::vector<std::pair<double, int>> edges;  // request start/end, for peak concurrency
  if (!results.empty() && results.front().ok) s.first_ttft = results.front().ttft;
  for (const RequestResult& r : results) {
    edges.push_back({r.start, +1});
    edges.push_back({r.start + r.e2e, -1});
    if (!r.ok) {
      ++s.failed;
      if (s.errors.size() < 5) s.errors.push_back(r.error);
      continue;
    }
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    ttft.push_back(r.ttft);
    ttft_sum += r.ttft;
    e2e.push_back(r.e2e);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / (r.output_tokens - 1));
    for (std::size_t i = 1; i < r.chunk_times.size(); ++i)
      itl.push_back(r.chunk_times[i] - r.chunk_times[i - 1]);
  }
  std::sort(edges.begin(), edges.end());
  int in_flight = 0;
  for (auto [t, delta] : edges)
    s.peak_concurrency = std::max(s.peak_concurrency, in_flight += delta);
  s.ttft = distribution_ms(ttft);
  s.tpot = distribution_ms(tpot);
  s.itl = distribution_ms(itl);
  s.e2e = distribution_ms(e2e);
  if (ttft_sum > 0) s.prefill_rate = double(s.input_tokens) / ttft_sum;
  if (duration_s > 0) {
    s.request_throughput = s.completed / duration_s;
    s.output_throughput = double(s.output_tokens) / duration_s;
    s.total_throughput = double(s.input_tokens + s.output_tokens) / duration_s;
  }
  // Output tokens over time: spread each request's tokens over its content chunks.
  const int bins = 40;
  s.plot_bin_s = std::max(duration_s / bins, 1e-3);
  s.output_tokens_per_second.assign(bins, 0.0);
  for (const RequestResult& r : results) {
    if (!r.ok || r.chunk_times.empty()) continue;
    const double per_chunk = double(r.output_tokens) / double(r.chunk_times.size());
    for (double t : r.chunk_times) {
      const int bin = std::min(bins - 1, int(t / s.plot_bin_s));
      s.output_tokens_per_second[std::size_t(bin)] += per_chunk / s.plot_bin_s;
    }
  }
  return s;
}

std::string format_summary(const RunSummary& s) {
  char line[160];
  std::string out;
  auto row = [&](const char* label, const std::string& value) {
    std::snprintf(line, sizeof line, "%-40s %16s\n", label, value.c_str());
    out += line;
  };
  auto num = [](double v, int digits = 2) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return std::string(b);
  };
  std::snprintf(line, sizeof line,
                "============ Serving Benchmark Result (max concurrency %d) ============\n",
                s.concurrency);
  out += line;
  row("Successful requests:", std::to_string(s.completed));
  row("Failed requests:", std::to_string(s.failed));
  row("Request rate configured (req/s):", s.request_rate > 0 ? num(s.request_rate) : "inf");
  row("Benchmark duration (s):", num(s.duration_s));
  row("Total input tokens:", std::to_string(s.input_tokens));
  row("Total generated tokens:", std::to_string(s.output_tokens));
  row("Request throughput (req/s):", num(s.request_throughput));
  row("Output token throughput (tok/s):", num(s.output_throughput));
  row("Peak concurrent requests:", std::to_string(s.peak_concurrency));
  row("Total token throughput (tok/s):", num(s.total_throughput));
  row("Prefill rate per request (tok/s):", num(s.prefill_rate));
  const std::pair<const char*, const Distribution*> groups[] = {
      {"Time to First Token", &s.ttft},
      {"Time per Output Token (excl. 1st token)", &s.tpot},
      {"Inter-token Latency", &s.itl},
      {"End-to-end Latency", &s.e2e}};
  const char* names[] = {"TTFT", "TPOT", "ITL", "E2EL"};
  for (int g = 0; g < 4; ++g) {
    std::snprintf(line, sizeof line, "%s\n",
                  ("---------------" + std::string(groups[g].first) + "---------------").c_str());
    out += line;
    row(("Mean " + std::string(names[g]) + " (ms):").c_str(), num(groups[g].second->mean));
    row(("Median " + std::string(names[g]) + " (ms):").c_str(), num(groups[g].second->median));
    row(("P90 " + std::string(names[g]) + " (ms):").c_str(), num(groups[g].second->p90));
    row(("P95 " + std::string(names[g]) + " (ms):").c_str(), num(groups[g].second->p95));
    row(("P99 " + std::string(names[g]) + " (ms):").c_str(), num(groups[g].second->p99));
  }
  if (s.spec_decode) out += format_spec_decode(*s.spec_decode);
  // The plot: one column per time bin, 8 rows, scaled to the peak.
  const double peak =
      s.output_tokens_per_second.empty()
          ? 0
          : *std::max_element(s.output_tokens_per_second.begin(), s.output_tokens_per_second.end());
  std::snprintf(line, sizeof line, "Output tokens/s over time (peak %.1f, %.2f s per column)\n",
                peak, s.plot_bin_s);
  out += line;
  for (int level = 8; level >= 1 && peak > 0; --level) {
    std::string bar = "  |";
    for (double v : s.output_tokens_per_second) bar += v >= peak * (level - 0.5) / 8 ? '#' : ' ';
    out += bar + "\n";
  }
  out += "  +" + std::string(s.output_tokens_per_second.size(), '-') + "\n";
  for (const std::string& e : s.errors) out += "error: " + e + "\n";
  out += std::string(70, '=') + "\n";
  return out;
}

nlohmann::json summary_json(const RunSummary& s) {
  auto dist = [](const Distribution& d) {
    return nlohmann::json{{"mean_ms", d.mean},
                          {"median_ms", d.median},
                          {"p90_ms", d.p90},
                          {"p95_ms", d.p95},
                          {"p99_ms", d.p99}};
  };
  nlohmann::json j = {
      {"max_concurrency", s.concurrency},
      {"request_rate", s.request_rate > 0 ? nlohmann::json(s.request_rate) : nlohmann::json("inf")},
      {"completed", s.completed},
      {"failed", s.failed},
      {"duration_s", s.duration_s},
      {"total_input_tokens", s.input_tokens},
      {"total_output_tokens", s.output_tokens},
      {"request_throughput", s.request_throughput},
      {"output_throughput", s.output_throughput},
      {"total_token_throughput", s.total_throughput},
      {"prefill_rate_per_request", s.prefill_rate},
      {"peak_concurrency", s.peak_concurrency},
      {"ttft", dist(s.ttft)},
      {"tpot", dist(s.tpot)},
      {"itl", dist(s.itl)},
      {"e2e_latency", dist(s.e2e)},
      {"output_tokens_per_second_over_time", s.output_tokens_per_second},
      {"plot_bin_s", s.plot_bin_s}};
  if (s.spec_decode) j["spec_decode"] = spec_decode_json(*s.spec_decode);
  return j;
}

}  // namespace nibble::bench
