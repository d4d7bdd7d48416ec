#pragma once
// The prompts a run sends. Random prompts are made of seeded random words and cut to exactly
// --input-len tokens with the server's own /tokenize, so the count is the model's, not a guess.
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bench_options.h"

namespace nibble::bench {

struct BenchPrompt {
  std::string text;                     // for chat, and for completions without ids
  std::optional<std::vector<int>> ids;  // exact token ids for completions when known
  int expected_input_tokens = 0;        // 0 when unknown
};

struct Dataset {
  std::vector<BenchPrompt> prompts;
  bool exact_lengths = false;  // /tokenize was available
  // Why not, when it was not: what the server answered ("POST /tokenize answered HTTP 404: ...")
  // or why it did not ("POST /tokenize got no answer: Connection").
  std::string tokenize_failure;
};

Dataset make_dataset(const BenchOptions& options);

}  // namespace nibble::bench
