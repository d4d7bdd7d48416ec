#pragma once
// Runs requests through an EngineLoop on any Backend, with or without a drafter, and collects each
// choice's tokens and the metrics: the harness of the speculative decoding exactness tests on the
// CPU backend (tests/spec/test_spec_decode.cpp) and on the CUDA backend
// (tests/backend/test_cuda_spec_decode.cpp).
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/runtime/engine_loop.h"
#include "engine/spec/drafter.h"

namespace nibble::runtime::testing {

struct Request {
  std::vector<int> prompt;
  SamplingParams params;
};

struct Outcome {
  std::vector<int> tokens;
  std::vector<SampledToken> samples;
  FinishReason finish = FinishReason::kNone;
};

struct SpecRun {
  std::vector<std::vector<Outcome>> outcomes;  // [request][choice]
  std::string metrics;
};

// The engine's shape. The defaults (a small KV cache of 4-token blocks) make drafts cross block
// boundaries and a batch of 64 preempt.
struct EngineShape {
  std::string model_name = "tiny";
  int num_blocks = 640, block_size = 4;
  int max_model_len = 256;
  int max_num_seqs = 64, max_num_batched_tokens = 256;
};

// Submits every request to one engine on `backend` (drafter null: no speculation), waits up to
// two minutes for every choice to finish (a gtest failure if one does not), and returns the
// choices' events and the registry's exposition.
SpecRun run_engine(backend::Backend& backend, const std::vector<Request>& requests,
                   std::shared_ptr<const spec::Drafter> drafter, int k,
                   const EngineShape& shape = {});

// The value of one series in a Prometheus text exposition, 0 when absent.
double metric(const std::string& text, const std::string& series);
// nibble_spec_decode_<name>_total of the model.
double spec_metric(const std::string& text, const std::string& name,
                   const std::string& model_name = "tiny");

// A random phrase of 6 tokens repeated with noise (every 9th token random), as documents repeat
// themselves: the ngram drafter finds matches in it.
std::vector<int> repeating_prompt(std::mt19937& gen, int length, int vocab);

// The counters of one run (gtest expectations): drafts verified, the per-position counts add up
// to the accepted tokens, no position accepts more than the one before it, every emitted token
// counted, every KV block returned.
void expect_counters_add_up(const SpecRun& run, int k, const std::string& model_name = "tiny");

}  // namespace nibble::runtime::testing
