#pragma once
// Runs one benchmark: sends every prompt with at most `concurrency` in flight, Poisson arrivals
// at --request-rate, and summarizes what the client saw.
#include <string>

#include "tools/bench/bench_dataset.h"
#include "tools/bench/bench_options.h"
#include "tools/bench/bench_report.h"

namespace nibble::bench {

// The first model the server lists; throws when the server does not answer.
std::string first_model(const BenchOptions& options);
RunSummary run_benchmark(const BenchOptions& options, const Dataset& dataset, int concurrency);

}  // namespace nibble::bench
