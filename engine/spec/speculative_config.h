#pragma once
// `--speculative-config`: which drafter proposes tokens and how many, as vLLM's JSON spells it
// ({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
// "prompt_lookup_max": 5}). Parsed and checked once at startup; every refusal names the key and
// what it expected. Methods vLLM knows that this engine has not built yet (eagle3, mtp,
// draft_model) are refused with a message that says so, not ignored.
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/spec/drafter.h"

namespace nibble::spec {

struct SpeculativeConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class SpecMethod { kNgram };

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::kNgram;
  int num_speculative_tokens = 0;  // k: drafted tokens verified per sequence and step, 1..32
  // ngram: the suffix of the sequence matched against its earlier tokens, from the longest
  // (prompt_lookup_max) down to the shortest (prompt_lookup_min) length tried.
  int prompt_lookup_min = 0;
  int prompt_lookup_max = 0;
};

inline constexpr int kMaxSpeculativeTokens = 32;

// Throws SpeculativeConfigError: not a JSON object, an unknown key, a value of the wrong type or
// range, a missing method or num_speculative_tokens, a method not built. When only one of
// prompt_lookup_min/max is given the other takes its value; neither: both 5.
SpeculativeConfig parse_speculative_config(std::string_view json);

const char* method_name(SpecMethod method);  // "ngram"

// The drafter the configuration names.
std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& config);

}  // namespace nibble::spec
