#pragma once
// The model's vocabulary as the grammar sees it: each token's bytes, and a byte trie over them
// (a prefix the grammar rejects rejects every token under it at once). Special tokens and ids
// without a token are never allowed by a grammar; end-of-sequence ids are allowed where the
// grammar is complete.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/structured/grammar.h"

namespace nibble::tokenizer {
class Tokenizer;
}

namespace nibble::structured {

// One node of the byte trie: the prefix of its parent plus `byte`. Nodes are stored in
// pre-order, so a node's subtree is the index range [node + 1, subtree_end) and skipping a
// rejected prefix is one jump. The tokens whose bytes end at node k are
// trie_tokens()[trie()[k].tokens_begin, trie()[k + 1].tokens_begin) (a sentinel node ends the
// array).
//
// class_height[c]: if this node's byte and every byte below it are in kTokenByteClasses[c], the
// most bytes from this node down to a token's end (1 for a leaf), else 0 (also when above 255).
// A mask walk accepts such a subtree whole when its state survives any string of the class that
// long (the bulk of a vocabulary inside a JSON string, a word or a number).
inline constexpr int kNumTokenByteClasses = 3;
struct TrieNode {
  std::uint32_t subtree_end = 0;
  std::uint32_t tokens_begin = 0;
  std::uint16_t depth = 0;  // bytes before this one
  unsigned char byte = 0;
  std::array<std::uint8_t, kNumTokenByteClasses> class_height{};
};

// The byte classes of TrieNode::class_height: printable ASCII that a JSON string takes as it
// is (no '"' or '\\'), letters and digits, digits.
const std::array<ByteSet, kNumTokenByteClasses>& token_byte_classes();

class TokenVocabulary {
 public:
  // bytes[id]: what the token adds to the output; nullopt: never allowed.
  TokenVocabulary(std::vector<std::optional<std::string>> bytes, std::vector<int> eos_ids);

  // vocab_size: the model's logits width (may exceed the tokenizer's vocabulary).
  // allowed_special: special tokens a grammar may still take, as their text (gpt-oss's harmony
  // markers, which a grammar writes as message headers).
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(
      const tokenizer::Tokenizer& tok, std::size_t vocab_size, std::vector<int> eos_ids,
      const std::vector<std::string>& allowed_special = {});

  std::size_t size() const { return bytes_.size(); }
  const std::optional<std::string>& bytes(int id) const { return bytes_[std::size_t(id)]; }
  const std::vector<int>& eos_ids() const { return eos_ids_; }
  bool is_eos(int id) const;

  // The byte trie (without a root node: depth-0 nodes are the first bytes) and the token ids
  // in the order its nodes own them (sorted by bytes). The deepest node is at depth
  // max_token_bytes() - 1.
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int>& trie_tokens() const { return sorted_; }
  std::size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  void build_trie();
  void measure_class_heights();

  std::vector<std::optional<std::string>> bytes_;
  std::vector<int> eos_ids_;
  std::vector<int> sorted_;
  std::vector<TrieNode> trie_;
  std::size_t max_token_bytes_ = 0;
};

}  // namespace nibble::structured
