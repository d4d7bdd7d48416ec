#pragma once
// nibble-ngram-bench's command line.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tools/ngram-bench/step_cost.h"
#include "tools/ngram-bench/workloads.h"

namespace nibble::tools {

extern const char* const kNgramBenchUsage;

struct NgramBenchOptions {
  std::filesystem::path tokenizer;
  std::vector<std::filesystem::path> corpus;
  std::vector<Workload> workloads = {Workload::kExtraction, Workload::kCodeEdit,
                                     Workload::kUnrelated};
  std::vector<int> context_tokens = {4096, 16384};
  std::vector<int> ks = {1, 2, 4, 5};
  int requests = 16;
  int min_n = 5, max_n = 5;  // the engine's defaults (speculative_config.cpp)
  std::uint64_t seed = 1;
  VerifyCosts verify_costs;
  double decode_step_ms = 0;  // 0: propose time is not set against a step
  bool json = false;
};

// --help prints kNgramBenchUsage and exits 0 (cli::parse_flags); a mistake is printed on stderr
// and gives nullopt.
std::optional<NgramBenchOptions> parse_ngram_bench_options(int argc, char** argv);

}  // namespace nibble::tools
