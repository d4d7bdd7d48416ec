#pragma once
// tokenizer.json "added_tokens": strings matched in the raw text before normalization and BPE.
// At each position the longest added token wins; the leftmost match is taken first (as
// transformers.js' splitter does). lstrip / rstrip remove the whitespace next to a match.
// `normalized` and `single_word` are read but, like transformers.js, not applied: no token
// in the supported families sets them in a way that changes matching.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/json_fields.h"

namespace nibble::tokenizer {

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

// A stretch of the input: either plain text (token == nullptr) or one added token.
struct TextSection {
  std::string_view text;
  const AddedToken* token = nullptr;
};

class AddedTokenSplitter {
 public:
  AddedTokenSplitter() = default;
  explicit AddedTokenSplitter(std::vector<AddedToken> tokens);

  std::vector<TextSection> split(std::string_view text) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // nullptr if `id` is not an added token.
  const AddedToken* find_id(std::int32_t id) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::int32_t>> children;  // sorted by byte
    std::int32_t token = -1;                                       // index into tokens_
  };
  std::int32_t child(std::int32_t node, unsigned char byte) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_{1};
  std::unordered_map<std::int32_t, std::size_t> by_id_;
};

// Parses the "added_tokens" array.
std::vector<AddedToken> parse_added_tokens(const Json& list, const std::string& where);

}  // namespace nibble::tokenizer
