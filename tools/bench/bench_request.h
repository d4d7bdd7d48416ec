#pragma once
// One streaming request, timed from the client: when it was sent, when each content chunk
// arrived, and the token counts the server reported in its usage chunk.
#include <chrono>
#include <string>
#include <vector>

#include "tools/bench/bench_dataset.h"

namespace nibble::bench {

using Clock = std::chrono::steady_clock;

struct RequestResult {
  bool ok = false;
  std::string error;
  double start = 0;                 // seconds since the run started
  double ttft = 0;                  // seconds
  double e2e = 0;                   // seconds
  std::vector<double> chunk_times;  // seconds since the run started, one per content chunk
  int prompt_tokens = 0;
  int output_tokens = 0;
};

RequestResult send_request(const BenchOptions& options, const BenchPrompt& prompt,
                           Clock::time_point run_start);

}  // namespace nibble::bench
