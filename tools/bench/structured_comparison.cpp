#include "tools/bench/structured_comparison.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "tools/bench/bench_report.h"
#include "tools/bench/bench_runner.h"
#include "tools/bench/server_metrics.h"

namespace nibble::bench {
namespace {

// A histogram's cumulative bucket counts by upper bound (le), summed over its series.
std::map<double, double> buckets(const std::string& text, const std::string& histogram) {
  std::map<double, double> out;
  for_each_sample(text, histogram + "_bucket", [&out](const std::string& line, double v) {
    const auto at = line.find("le=\"");
    if (at == std::string::npos) return;
    const std::string le = line.substr(at + 4, line.find('"', at + 4) - at - 4);
    out[le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le)] += v;
  });
  return out;
}

// The q-quantile of the observations between two scrapes, interpolated inside its bucket as
// Prometheus' histogram_quantile does; 0 when there are none.
double quantile(const std::map<double, double>& before, const std::map<double, double>& after,
                double q) {
  std::vector<std::pair<double, double>> cumulative;  // (le, count)
  for (const auto& [le, count] : after) {
    const auto it = before.find(le);
    cumulative.emplace_back(le, count - (it == before.end() ? 0 : it->second));
  }
  if (cumulative.empty() || cumulative.back().second <= 0) return 0;
  const double rank = q * cumulative.back().second;
  double lower = 0, below = 0;
  for (const auto& [le, count] : cumulative) {
    if (count >= rank) {
      if (std::isinf(le)) return lower;  // past the last finite bound: report that bound
      return count > below ? lower + (le - lower) * (rank - below) / (count - below) : le;
    }
    lower = le;
    below = count;
  }
  return lower;
}

double decode_tokens_per_s(const RunSummary& s) {
  return s.tpot.mean > 0 ? 1000.0 / s.tpot.mean : 0;
}

}  // namespace

std::string response_format_for_schema_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--structured-schema: cannot read " + path);
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(in, nullptr, false);
  if (schema.is_discarded() || !schema.is_object()) {
    throw std::runtime_error("--structured-schema: " + path + " is not a JSON object");
  }
  return nlohmann::ordered_json{
      {"type", "json_schema"},
      {"json_schema", {{"name", "bench"}, {"schema", schema}, {"strict", true}}}}
      .dump();
}

nlohmann::json compare_structured(const BenchOptions& options, const Dataset& dataset,
                                  int concurrency, int& failures) {
  BenchOptions plain = options;
  plain.response_format.clear();
  const RunSummary without = run_benchmark(plain, dataset, concurrency);

  BenchOptions constrained = options;
  constrained.response_format = response_format_for_schema_file(options.structured_schema_path);
  const std::string mask = "nibble_structured_output_mask_seconds";
  const std::string compile = "nibble_structured_output_compile_seconds";
  const std::string before = scrape_metrics(options);
  const RunSummary with = run_benchmark(constrained, dataset, concurrency);
  const std::string after = scrape_metrics(options);
  const double compile_s =
      series_sum(after, compile + "_sum") - series_sum(before, compile + "_sum");
  const double compiles =
      series_sum(after, compile + "_count") - series_sum(before, compile + "_count");
  const double mask_s = series_sum(after, mask + "_sum") - series_sum(before, mask + "_sum");
  const double masks = series_sum(after, mask + "_count") - series_sum(before, mask + "_count");
  const auto mask_before = buckets(before, mask), mask_after = buckets(after, mask);
  const double mask_ms = masks > 0 ? mask_s / masks * 1e3 : 0;
  const double p50_ms = quantile(mask_before, mask_after, 0.5) * 1e3,
               p90_ms = quantile(mask_before, mask_after, 0.9) * 1e3,
               p99_ms = quantile(mask_before, mask_after, 0.99) * 1e3;
  failures += without.failed + with.failed;

  const double plain_tps = decode_tokens_per_s(without), schema_tps = decode_tokens_per_s(with);
  // What a mask computed before the step (not overlapped) would add to a decode step. The first
  // constrained request of a server also pays the vocabulary's preparation (its TTFT shows it).
  const double mask_share = without.tpot.mean > 0 ? mask_ms / without.tpot.mean : 0;
  std::printf("%s", format_summary(without).c_str());
  std::printf("%s", format_summary(with).c_str());
  std::printf(
      "=========== Structured outputs (%s) ===========\n"
      "Decode tokens/s per request, no schema:   %10.1f\n"
      "Decode tokens/s per request, with schema: %10.1f\n"
      "Ratio (with / without):                   %10.3f\n"
      "Mean output tokens, without / with:       %6.1f / %.1f\n"
      "Server masks computed:                    %10.0f\n"
      "Server mask time per token (ms):          %10.4f\n"
      "Server mask time p50 / p90 / p99 (ms):    %.4f / %.4f / %.4f\n"
      "Mask time / decode step without schema:   %10.3f\n"
      "Server schema compile time (ms):          %10.2f%s\n"
      "First request with the schema, TTFT (ms): %10.2f (run median %.2f)\n",
      options.structured_schema_path.c_str(), plain_tps, schema_tps,
      plain_tps > 0 ? schema_tps / plain_tps : 0,
      without.completed ? double(without.output_tokens) / without.completed : 0,
      with.completed ? double(with.output_tokens) / with.completed : 0, masks, mask_ms, p50_ms,
      p90_ms, p99_ms, mask_share, compile_s * 1e3,
      compiles == 0 ? " (cached by an earlier run, or no /metrics)" : "", with.first_ttft * 1e3,
      with.ttft.median);
  std::fflush(stdout);
  return {{"without_schema", summary_json(without)},
          {"with_schema", summary_json(with)},
          {"decode_tokens_per_s_without", plain_tps},
          {"decode_tokens_per_s_with", schema_tps},
          {"masks", masks},
          {"mask_ms_per_token", mask_ms},
          {"mask_ms_p50", p50_ms},
          {"mask_ms_p90", p90_ms},
          {"mask_ms_p99", p99_ms},
          {"mask_share_of_decode_step", mask_share},
          {"compile_ms", compile_s * 1e3},
          {"compiles", compiles},
          {"first_ttft_ms_with", with.first_ttft * 1e3}};
}

}  // namespace nibble::bench
