#pragma once
// The model's vocabulary as the grammar sees it: each token's bytes, sorted so that tokens
// sharing a prefix are adjacent (a byte trie walked in order: a prefix the grammar rejects
// rejects every token under it at once). Special tokens and ids without a token are never
// allowed by a grammar; end-of-sequence ids are allowed where the grammar is complete.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nibble::tokenizer {
class Tokenizer;
}

namespace nibble::structured {

class TokenVocabulary {
 public:
  // bytes[id]: what the token adds to the output; nullopt: never allowed.
  TokenVocabulary(std::vector<std::optional<std::string>> bytes, std::vector<int> eos_ids);

  // vocab_size: the model's logits width (may exceed the tokenizer's vocabulary).
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const tokenizer::Tokenizer& tok,
                                                               std::size_t vocab_size,
                                                               std::vector<int> eos_ids);

  std::size_t size() const { return bytes_.size(); }
  const std::optional<std::string>& bytes(int id) const { return bytes_[std::size_t(id)]; }
  const std::vector<int>& eos_ids() const { return eos_ids_; }
  bool is_eos(int id) const;

  // Allowed tokens sorted by bytes, and each one's common prefix length with the previous.
  const std::vector<int>& sorted_ids() const { return sorted_; }
  const std::vector<std::uint16_t>& common_prefix() const { return lcp_; }

 private:
  std::vector<std::optional<std::string>> bytes_;
  std::vector<int> eos_ids_;
  std::vector<int> sorted_;
  std::vector<std::uint16_t> lcp_;
};

}  // namespace nibble::structured
