#include "engine/server/generation_session.h"

#include "engine/text/utf8.h"

namespace nibble::server {
namespace {

// text_offset is in characters, as OpenAI's (Python str) offsets are, not bytes.
std::size_t characters(const std::string& text) {
  return text::to_code_points(text).size();
}

nlohmann::json utf8_bytes(const std::string& s) {
  nlohmann::json bytes = nlohmann::json::array();
  for (unsigned char c : s) bytes.push_back(int(c));
  return bytes;
}

}  // namespace

GenerationSession::GenerationSession(const tokenizer::Tokenizer& tokenizer, Endpoint endpoint,
                                     const runtime::SamplingParams& params, int num_prompt_tokens,
                                     std::shared_ptr<runtime::OutputChannel> channel,
                                     bool skip_special_tokens)
    : tokenizer_(tokenizer),
      endpoint_(endpoint),
      logprobs_(params.logprobs),
      num_prompt_tokens_(num_prompt_tokens),
      channel_(std::move(channel)),
      choices_(std::size_t(std::max(1, params.n))),
      text_length_(choices_.size(), 0) {
  for (Choice& c : choices_) {
    c.text = std::make_unique<ChoiceText>(tokenizer_, params.stop, skip_special_tokens,
                                          params.include_stop_str_in_output);
  }
}

nlohmann::json GenerationSession::logprob_entry(const runtime::SampledToken& sample,
                                                std::size_t text_offset) const {
  auto token_text = [this](int id) {
    return tokenizer_.contains(id) ? tokenizer_.decode({id}) : std::string();
  };
  if (endpoint_ == Endpoint::kChat) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& t : sample.top_logprobs) {
      const std::string s = token_text(t.token);
      top.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", utf8_bytes(s)}});
    }
    const std::string s = token_text(sample.token);
    return {
        {"token", s}, {"logprob", sample.logprob}, {"bytes", utf8_bytes(s)}, {"top_logprobs", top}};
  }
  nlohmann::json top = nlohmann::json::object();
  for (const auto& t : sample.top_logprobs) top[token_text(t.token)] = t.logprob;
  return {{"token", token_text(sample.token)},
          {"logprob", sample.logprob},
          {"top", top},
          {"offset", text_offset}};
}

std::vector<ChoiceDelta> GenerationSession::poll(std::chrono::milliseconds timeout) {
  std::vector<ChoiceDelta> deltas(choices_.size());
  std::vector<nlohmann::json> entries(choices_.size(), nlohmann::json::array());
  std::vector<bool> touched(choices_.size(), false);
  for (runtime::TokenEvent& e : channel_->pop(timeout)) {
    if (e.choice < 0 || e.choice >= int(choices_.size())) continue;
    Choice& choice = choices_[std::size_t(e.choice)];
    if (choice.finished) continue;  // tokens produced after a stop string matched
    num_cached_prompt_tokens_ = std::max(num_cached_prompt_tokens_, e.num_cached_prompt_tokens);
    ChoiceDelta& delta = deltas[std::size_t(e.choice)];
    touched[std::size_t(e.choice)] = true;
    if (e.token >= 0) {
      if (!first_token_time_) first_token_time_ = std::chrono::steady_clock::now();
      ++choice.num_tokens;
      if (!e.stop_token) {
        if (logprobs_ >= 0) {
          entries[std::size_t(e.choice)].push_back(logprob_entry(
              e.sample, text_length_[std::size_t(e.choice)] + characters(delta.text)));
        }
        delta.text += choice.text->push(e.token);
      }
    }
    std::optional<std::string> reason;
    if (choice.text->stopped()) {
      channel_->stop_choice(e.choice);  // free the engine from generating past the stop string
      reason = "stop";
    } else if (e.finish != runtime::FinishReason::kNone) {
      delta.text += choice.text->finish();
      if (e.finish == runtime::FinishReason::kError)
        error_ = e.error.empty() ? "generation failed" : e.error;
      reason = runtime::finish_reason_name(e.finish);
    }
    if (reason) {
      choice.finished = true;
      ++finished_choices_;
      delta.finish_reason = reason;
    }
  }
  std::vector<ChoiceDelta> out;
  for (std::size_t i = 0; i < choices_.size(); ++i) {
    if (!touched[i]) continue;
    deltas[i].index = int(i);
    text_length_[i] += characters(deltas[i].text);
    if (logprobs_ >= 0) deltas[i].logprobs = std::move(entries[i]);
    out.push_back(std::move(deltas[i]));
  }
  return out;
}

nlohmann::json GenerationSession::usage() const {
  int completion = 0;
  for (const Choice& c : choices_) completion += c.num_tokens;
  return {{"prompt_tokens", num_prompt_tokens_},
          {"completion_tokens", completion},
          {"total_tokens", num_prompt_tokens_ + completion},
          {"prompt_tokens_details", {{"cached_tokens", num_cached_prompt_tokens_}}}};
}

}  // namespace nibble::server
