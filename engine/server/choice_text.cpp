#include "engine/server/choice_text.h"

#include <algorithm>

namespace nibble::server {

ChoiceText::ChoiceText(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop,
                       bool skip_special_tokens, bool include_stop)
    : tokenizer_(tokenizer),
      decoder_(tokenizer, tokenizer::DecodeOptions{.skip_special_tokens = skip_special_tokens}),
      stop_(std::move(stop)),
      include_stop_(include_stop) {
  for (const std::string& s : stop_) holdback_ = std::max(holdback_, s.size() - 1);
}

std::string ChoiceText::push(int token) {
  if (stopped_) return {};
  if (!tokenizer_.contains(token)) return {};  // a padding row of the model's vocabulary
  pending_ += decoder_.push(token);
  return release(false);
}

std::string ChoiceText::finish() {
  if (stopped_) return {};
  pending_ += decoder_.flush();
  return release(true);
}

std::string ChoiceText::release(bool final) {
  // The earliest match wins; of two at one position, the one listed first.
  std::size_t match = std::string::npos, match_size = 0;
  for (const std::string& s : stop_) {
    const std::size_t at = pending_.find(s);
    if (at < match) {
      match = at;
      match_size = s.size();
    }
  }
  if (match != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, include_stop_ ? match + match_size : match);
    pending_.clear();
    return out;
  }
  std::size_t cut =
      final ? pending_.size() : (pending_.size() > holdback_ ? pending_.size() - holdback_ : 0);
  // Never cut inside a UTF-8 character: back up to its first byte.
  while (cut > 0 && cut < pending_.size() &&
         (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

}  // namespace nibble::server
