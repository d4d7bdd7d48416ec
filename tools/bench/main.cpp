// nibble-bench: load-tests an OpenAI-compatible server the way `vllm bench serve` does.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tools/bench/bench_dataset.h"
#include "tools/bench/bench_options.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/bench_runner.h"
#include "tools/bench/structured_comparison.h"

int main(int argc, char** argv) {
  using namespace nibble::bench;
  BenchOptions options;
  try {
    bool version = false;
    if (!parse_bench_options(argc, argv, options, &version)) {
      if (version)
        std::printf("nibble-bench %s\n", NIBBLE_VERSION);
      else
        std::fputs(kBenchUsage, stdout);
      return 0;
    }
    if (options.model.empty()) options.model = first_model(options);
    std::fprintf(stderr,
                 "nibble-bench: %s, model %s, %s endpoint, %d prompts of %d tokens -> %d tokens\n",
                 options.base_url.c_str(), options.model.c_str(), options.endpoint.c_str(),
                 options.num_prompts, options.input_len, options.output_len);
    const Dataset dataset = make_dataset(options);
    if (options.dataset == "random" && !dataset.exact_lengths) {
      std::fprintf(stderr, "nibble-bench: %s; prompt lengths are approximate\n",
                   dataset.tokenize_failure.c_str());
    }
    nlohmann::json runs = nlohmann::json::array();
    int failures = 0;
    for (int concurrency : options.max_concurrency) {
      if (!options.structured_schema_path.empty()) {
        runs.push_back(compare_structured(options, dataset, concurrency, failures));
        continue;
      }
      RunSummary summary = run_benchmark(options, dataset, concurrency);
      std::fputs(format_summary(summary).c_str(), stdout);
      std::fflush(stdout);
      runs.push_back(summary_json(summary));
      failures += summary.failed;
    }
    if (!options.json_path.empty()) {
      std::ofstream out(options.json_path);
      out << nlohmann::json{{"base_url", options.base_url},
                            {"model", options.model},
                            {"endpoint", options.endpoint},
                            {"dataset", options.dataset},
                            {"input_len", options.input_len},
                            {"output_len", options.output_len},
                            {"num_prompts", options.num_prompts},
                            {"seed", options.seed},
                            {"runs", runs}}
                 .dump(2)
          << "\n";
      if (!out) throw std::runtime_error("cannot write " + options.json_path);
    }
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nibble-bench: %s\n", e.what());
    return 2;
  }
}
