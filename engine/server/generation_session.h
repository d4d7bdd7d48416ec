#pragma once
// One accepted request as the HTTP thread sees it: reads the engine's token events for every
// choice, turns them into text deltas (stop strings applied, stop tokens left out), logprobs
// in the endpoint's format, finish reasons and the usage block. Used by the streaming and the
// non-streaming paths alike.
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/output_channel.h"
#include "engine/runtime/sampling_params.h"
#include "engine/server/choice_text.h"

namespace nibble::server {

enum class Endpoint { kCompletions, kChat };

struct ChoiceDelta {
  int index = 0;
  std::string text;
  nlohmann::json logprobs;                   // null, or this delta's entries
  std::optional<std::string> finish_reason;  // set on the choice's last delta
};

class GenerationSession {
 public:
  GenerationSession(const tokenizer::Tokenizer& tokenizer, Endpoint endpoint,
                    const runtime::SamplingParams& params, int num_prompt_tokens,
                    std::shared_ptr<runtime::OutputChannel> channel,
                    bool skip_special_tokens = true);

  // Waits up to `timeout` for events and returns what they add, at most one delta per choice.
  std::vector<ChoiceDelta> poll(std::chrono::milliseconds timeout);
  bool done() const { return finished_choices_ == int(choices_.size()); }
  // An engine-side failure (device error), if one ended the request.
  const std::optional<std::string>& error() const { return error_; }
  nlohmann::json usage() const;
  // When the first generated token reached this session (any choice); unset before it.
  const std::optional<std::chrono::steady_clock::time_point>& first_token_time() const {
    return first_token_time_;
  }
  // The client is gone: abort the request in the engine.
  void cancel() { channel_->cancel(); }

 private:
  struct Choice {
    std::unique_ptr<ChoiceText> text;
    int num_tokens = 0;
    bool finished = false;
  };
  nlohmann::json logprob_entry(const runtime::SampledToken& sample, std::size_t text_offset) const;

  const tokenizer::Tokenizer& tokenizer_;
  Endpoint endpoint_;
  int logprobs_;
  int num_prompt_tokens_;
  int num_cached_prompt_tokens_ = 0;
  std::shared_ptr<runtime::OutputChannel> channel_;
  std::vector<Choice> choices_;
  std::vector<std::size_t> text_length_;  // per choice, in characters: logprobs' text_offset
  int finished_choices_ = 0;
  std::optional<std::string> error_;
  std::optional<std::chrono::steady_clock::time_point> first_token_time_;
};

}  // namespace nibble::server
