#pragma once
// The BPE "model" of tokenizer.json: vocab, ranked merges, unk / byte_fallback / fuse_unk /
// ignore_merges. encode() turns one pre-token into ids. The merge loop keeps symbols in a
// linked list and candidate pairs in a min-heap keyed by (rank, position), so a word of n
// symbols costs O(n log n), and results for repeated pre-tokens come from a bounded cache.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/json_fields.h"

namespace nibble::tokenizer {

using TokenId = std::int32_t;

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object; `where` names it for errors.
  BpeModel(const Json& model, const std::string& where);

  // Ids for one pre-token (already in the vocab's alphabet: ByteLevel text or ▁-text).
  void encode(std::string_view word, std::vector<TokenId>& out) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  // Registers an added token so id<->text lookups include it (as transformers does).
  void add_token(const std::string& token, TokenId id);
  // nullptr if the id is unknown.
  const std::string* id_to_token(TokenId id) const;
  std::size_t vocab_size() const { return id_to_token_.size(); }
  bool byte_fallback() const { return byte_fallback_; }

 private:
  struct Merge {
    std::int32_t rank;
    TokenId merged;
  };
  static std::uint64_t pair_key(TokenId a, TokenId b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;
  void emit_unknown(std::string_view ch, std::vector<TokenId>& out) const;

  std::unordered_map<std::string, TokenId> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::optional<TokenId> unk_id_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  TokenId byte_ids_[256] = {};  // <0xNN> token ids (-1 if absent), when byte_fallback

  // Repeated pre-tokens (" the", "\n") skip the merge loop. Cleared when full.
  static constexpr std::size_t kCacheCapacity = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache_;
};

}  // namespace nibble::tokenizer
