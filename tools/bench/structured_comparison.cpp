#include "tools/bench/structured_comparison.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tools/bench/bench_report.h"
#include "tools/bench/bench_runner.h"

namespace nibble::bench {
namespace {

// The sum of a metric's series in the server's /metrics (0 when absent).
double scrape_sum(const BenchOptions& o, const std::string& name) {
  httplib::Client client(o.base_url);
  client.set_connection_timeout(5, 0);
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  auto res = client.Get("/metrics", headers);
  if (!res || res->status != 200) return 0;
  std::istringstream in(res->body);
  std::string line;
  double sum = 0;
  while (std::getline(in, line)) {
    if (!line.starts_with(name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : ' ';
    if (next != '{' && next != ' ') continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
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
  const double compile_before = scrape_sum(options, "nibble_structured_output_compile_seconds_sum");
  const double mask_sum_before = scrape_sum(options, "nibble_structured_output_mask_seconds_sum");
  const double mask_count_before =
      scrape_sum(options, "nibble_structured_output_mask_seconds_count");
  const RunSummary with = run_benchmark(constrained, dataset, concurrency);
  const double compile_s =
      scrape_sum(options, "nibble_structured_output_compile_seconds_sum") - compile_before;
  const double mask_s =
      scrape_sum(options, "nibble_structured_output_mask_seconds_sum") - mask_sum_before;
  const double masks =
      scrape_sum(options, "nibble_structured_output_mask_seconds_count") - mask_count_before;
  failures += without.failed + with.failed;

  const double plain_tps = decode_tokens_per_s(without), schema_tps = decode_tokens_per_s(with);
  std::printf("%s", format_summary(without).c_str());
  std::printf("%s", format_summary(with).c_str());
  std::printf(
      "=========== Structured outputs (%s) ===========\n"
      "Decode tokens/s per request, no schema:   %10.1f\n"
      "Decode tokens/s per request, with schema: %10.1f\n"
      "Ratio (with / without):                   %10.3f\n"
      "Mean output tokens, without / with:       %6.1f / %.1f\n"
      "Server mask time per token (ms):          %10.4f\n"
      "Server schema compile time (ms):          %10.2f%s\n",
      options.structured_schema_path.c_str(), plain_tps, schema_tps,
      plain_tps > 0 ? schema_tps / plain_tps : 0,
      without.completed ? double(without.output_tokens) / without.completed : 0,
      with.completed ? double(with.output_tokens) / with.completed : 0,
      masks > 0 ? mask_s / masks * 1e3 : 0, compile_s * 1e3,
      compile_s == 0 ? " (cached by an earlier run, or no /metrics)" : "");
  std::fflush(stdout);
  return {{"without_schema", summary_json(without)},
          {"with_schema", summary_json(with)},
          {"decode_tokens_per_s_without", plain_tps},
          {"decode_tokens_per_s_with", schema_tps},
          {"mask_ms_per_token", masks > 0 ? mask_s / masks * 1e3 : 0},
          {"compile_ms", compile_s * 1e3}};
}

}  // namespace nibble::bench
