#include "engine/structured/token_vocabulary.h"

#include <algorithm>

#include "engine/tokenizer/tokenizer.h"

namespace nibble::structured {

TokenVocabulary::TokenVocabulary(std::vector<std::optional<std::string>> bytes,
                                 std::vector<int> eos_ids)
    : bytes_(std::move(bytes)), eos_ids_(std::move(eos_ids)) {
  for (std::size_t id = 0; id < bytes_.size(); ++id) {
    if (is_eos(int(id))) bytes_[id].reset();  // EOS is decided by completeness, not bytes
    if (bytes_[id] && !bytes_[id]->empty()) sorted_.push_back(int(id));
  }
  std::sort(sorted_.begin(), sorted_.end(), [this](int a, int b) {
    return *bytes_[std::size_t(a)] < *bytes_[std::size_t(b)] ||
           (*bytes_[std::size_t(a)] == *bytes_[std::size_t(b)] && a < b);
  });
  lcp_.resize(sorted_.size());
  for (std::size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = *bytes_[std::size_t(sorted_[i - 1])];
    const std::string& b = *bytes_[std::size_t(sorted_[i])];
    std::size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n] && n < 0xffff) ++n;
    lcp_[i] = std::uint16_t(n);
  }
}

bool TokenVocabulary::is_eos(int id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(
    const tokenizer::Tokenizer& tok, std::size_t vocab_size, std::vector<int> eos_ids) {
  std::vector<std::optional<std::string>> bytes(vocab_size);
  for (std::size_t id = 0; id < vocab_size; ++id) {
    if (!tok.contains(int(id)) || tok.is_special(int(id))) continue;
    // Not at the start of the output: the prompt always precedes generated tokens.
    bytes[id] = tok.decode_token_bytes(int(id), false);
  }
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::move(eos_ids));
}

}  // namespace nibble::structured
