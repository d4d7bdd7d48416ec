#pragma once
// `--speculative-config`: which drafter proposes tokens and how many, as vLLM's JSON spells it
// ({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
// "prompt_lookup_max": 5}, or {"method": "draft_model", "model": "/models/Qwen3-0.6B",
// "num_speculative_tokens": 4}, or {"method": "mtp", "num_speculative_tokens": 2}: the served
// model's own multi-token-prediction module, or {"method": "eagle3", "model":
// "/models/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}: an EAGLE-3 head trained
// for the served model). Parsed and checked once at startup; every refusal names the key and
// what it expected. Methods vLLM knows that this engine has not built (eagle, EAGLE-1's heads)
// are refused with a message that says so, not ignored.
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/spec/drafter.h"

namespace nibble::spec {

struct SpeculativeConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class SpecMethod { kNgram, kDraftModel, kMtp, kEagle3 };

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::kNgram;
  int num_speculative_tokens = 0;  // k: drafted tokens verified per sequence and step, 1..32
  // ngram: the suffix of the sequence matched against its earlier tokens, from the longest
  // (prompt_lookup_max) down to the shortest (prompt_lookup_min) length tried.
  int prompt_lookup_min = 0;
  int prompt_lookup_max = 0;
  // draft_model: the draft model's directory or Hub id, as serve's model argument takes it
  // (engine/cli/model_argument.h); it must share the target's vocabulary. eagle3: the head's
  // directory or Hub id (model::load_eagle3_head).
  std::string model;
};

inline constexpr int kMaxSpeculativeTokens = 32;

// Throws SpeculativeConfigError: not a JSON object, an unknown key, a value of the wrong type or
// range, a missing method or num_speculative_tokens, a method not built, draft_model or eagle3
// without a model or with ngram's prompt_lookup keys, ngram or mtp with a model, mtp with
// prompt_lookup keys. ngram: when only one of
// prompt_lookup_min/max is given the other takes its value; neither: both 5.
SpeculativeConfig parse_speculative_config(std::string_view json);

const char* method_name(SpecMethod method);  // "ngram", "draft_model", "mtp", "eagle3"

// The drafter the configuration names, for methods without weights (ngram). draft_model loads a
// model onto a backend: serve builds its DraftModelDrafter (draft_model_drafter.h), and mtp's
// and eagle3's HiddenStateDrafter (hidden_state_drafter.h); here they throw
// SpeculativeConfigError.
std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& config);

}  // namespace nibble::spec
