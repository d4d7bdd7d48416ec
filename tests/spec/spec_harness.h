#pragma once
// The exactness harness of speculative decoding: requests run through an engine loop on any
// backend (by default a KV cache of 640 four-token blocks, so drafts cross block boundaries and a
// batch of 64 preempts), with and without a drafter, and what the runs must share. The CPU
// backend's suites (tests/spec) and the CUDA backend's (tests/backend/test_cuda_spec_decode.cpp)
// share it. Metrics are read under model_name "tiny" unless told otherwise.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/model_config.h"
#include "engine/runtime/output_channel.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/sampling_params.h"
#include "engine/spec/drafter.h"

namespace nibble::runtime::testing {

// Prompt tokens are drawn from [0, kPromptVocab): valid for every test model.
constexpr int kPromptVocab = 97;

// The suites' tiny Llama (hidden 32, 4 query and 2 KV heads of 8, 256 positions).
model::ModelConfig tiny_llama_config(int layers, int vocab = kPromptVocab);

// The model the requests run on. state_slots: one per sequence (64) for a hybrid model, else 0.
struct SpecTarget {
  backend::Backend* backend = nullptr;
  int state_slots = 0;
};

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

// The engine's shape.
struct EngineShape {
  std::string model_name = "tiny";
  int num_blocks = 640, block_size = 4;
  int max_model_len = 256;
  int max_num_seqs = 64, max_num_batched_tokens = 256;
  // false: a sliding-window model's pool keeps every sliding block (the runner reports a window
  // longer than any sequence), the reference a run that frees them must match.
  bool free_window_blocks = true;
  bool enable_prefix_caching = true;  // EngineConfig::enable_prefix_caching
};

// Submits every request to one engine (drafter null: no speculation; k drafts per step), waits
// up to two minutes for every choice to finish (a gtest failure if one does not), and returns
// the choices' events and the registry's exposition.
SpecRun run_engine(const SpecTarget& target, const std::vector<Request>& requests,
                   std::shared_ptr<const spec::Drafter> drafter, int k, const EngineShape& shape);
// run_engine with the default shape.
SpecRun generate(const SpecTarget& target, const std::vector<Request>& requests,
                 std::shared_ptr<const spec::Drafter> drafter, int k);

// The value of one series in a Prometheus text exposition, 0 when absent.
double metric(const std::string& text, const std::string& series);
// nibble_spec_decode_<name>_total of the model.
double spec_metric(const std::string& text, const std::string& name,
                   const std::string& model_name = "tiny");

// A random phrase of 6 tokens from [0, vocab) repeated with noise (every 9th token random), as
// documents repeat themselves: the ngram drafter finds matches in it.
std::vector<int> repeating_prompt(std::mt19937& gen, int length, int vocab = kPromptVocab);
// Mixed prompt lengths (3..40) and max_tokens (1..30), logprobs on a third of the requests.
std::vector<Request> mixed_greedy_requests(int batch);
// mixed_greedy_requests(batch) sampled instead: temperature 0.8, top-p 0.9, top-k 8 on every other
// request, repetition/presence/frequency penalties, seeds first_seed + i, n = 2 (two sequences of
// one prompt).
std::vector<Request> seeded_sampled_requests(int batch, std::uint64_t first_seed);
// Each request's prompt followed by its greedy continuation of 40 tokens, without speculation.
std::vector<std::vector<int>> greedy_references(const SpecTarget& target,
                                                std::vector<Request> requests);

// Stop tokens that land inside a draft: every fourth request (1, 5, ...) stops at a token of its
// greedy continuation (refs: greedy_references of the same requests) some steps in.
void add_mid_draft_stops(std::vector<Request>& requests, const std::vector<std::vector<int>>& refs);

// Tokens, finish reasons and logprobs identical; logprobs within logprob_tolerance where it is
// given (a hybrid model's runs whose schedules split prompts and recomputations into other
// chunks: its chunked and recurrent forms agree to rounding, docs/models.md).
void expect_same(const SpecRun& expected, const SpecRun& actual, const std::string& what,
                 float logprob_tolerance = 0.0f);
// The counters of one run add up (drafts, per-position acceptance, tokens) and every KV block
// came back.
void expect_counters_add_up(const SpecRun& run, int k, const std::string& model_name = "tiny");

// mixed_greedy_requests(batch), stop tokens landing mid-draft, run without speculation and with
// the ngram (k 4), oracle (k 4, every draft accepted) and always-wrong (k 3, none accepted)
// drafters: the same tokens, finish reasons and logprobs. ngram_accepts: the ngram drafter
// must have a draft accepted (at batch > 1; a model whose outputs repeat the prompt's phrases).
void expect_greedy_exactness(const SpecTarget& target, int batch, bool ngram_accepts = true);

}  // namespace nibble::runtime::testing
