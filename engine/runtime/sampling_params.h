#pragma once
// What a request asks of generation: OpenAI / vLLM sampling parameters, already validated
// by the server. Defaults follow the OpenAI API (temperature 1, top_p 1, no penalties).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nibble::runtime {

struct SamplingParams {
  int max_tokens = 16;
  float temperature = 1.0f;         // 0 means greedy
  float top_p = 1.0f;               // (0, 1]
  int top_k = 0;                    // 0 or -1: off
  float min_p = 0.0f;               // [0, 1]
  float presence_penalty = 0.0f;    // [-2, 2], over generated tokens
  float frequency_penalty = 0.0f;   // [-2, 2], over generated tokens
  float repetition_penalty = 1.0f;  // > 0, over prompt and generated tokens (HF semantics)
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;            // stop strings, not emitted unless the next is set
  bool include_stop_str_in_output = false;  // vLLM's: the matched stop string stays in the text
  std::vector<int> stop_token_ids;          // stop tokens, not emitted
  bool ignore_eos = false;
  int logprobs = -1;  // -1: none; k >= 0: sampled token's logprob plus top k
  int n = 1;

  bool greedy() const { return temperature <= 0.0f; }
};

}  // namespace nibble::runtime
