#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

namespace nibble::tokenizer {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)) {
  for (std::size_t t = 0; t < tokens_.size(); ++t) {
    by_id_[tokens_[t].id] = t;
    if (tokens_[t].content.empty()) continue;
    std::int32_t node = 0;
    for (char c : tokens_[t].content) {
      const auto byte = static_cast<unsigned char>(c);
      std::int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<std::int32_t>(trie_.size());
        trie_.emplace_back();
        auto& kids = trie_[node].children;
        kids.insert(std::lower_bound(kids.begin(), kids.end(), std::pair{byte, std::int32_t{-1}}),
                    {byte, next});
      }
      node = next;
    }
    trie_[node].token = static_cast<std::int32_t>(t);
  }
}

std::int32_t AddedTokenSplitter::child(std::int32_t node, unsigned char byte) const {
  const auto& kids = trie_[node].children;
  auto it = std::lower_bound(kids.begin(), kids.end(), std::pair{byte, std::int32_t{-1}});
  return it != kids.end() && it->first == byte ? it->second : -1;
}

const AddedToken* AddedTokenSplitter::find_id(std::int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::vector<TextSection> AddedTokenSplitter::split(std::string_view text) const {
  std::vector<TextSection> sections;
  std::size_t plain_start = 0, pos = 0;
  while (pos < text.size()) {
    std::int32_t node = 0, best = -1;
    std::size_t best_end = pos;
    for (std::size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (trie_[node].token >= 0) {
        best = trie_[node].token;
        best_end = i + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    if (pos > plain_start)
      sections.push_back({text.substr(plain_start, pos - plain_start), nullptr});
    sections.push_back({text.substr(pos, best_end - pos), &tokens_[best]});
    pos = plain_start = best_end;
  }
  if (plain_start < text.size()) sections.push_back({text.substr(plain_start), nullptr});

  // lstrip / rstrip eat the whitespace of the neighbouring plain text.
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const AddedToken* t = sections[i].token;
    if (!t) continue;
    if (t->lstrip && i > 0 && !sections[i - 1].token) {
      auto& prev = sections[i - 1].text;
      while (!prev.empty() && is_space(prev.back())) prev.remove_suffix(1);
    }
    if (t->rstrip && i + 1 < sections.size() && !sections[i + 1].token) {
      auto& next = sections[i + 1].text;
      while (!next.empty() && is_space(next.front())) next.remove_prefix(1);
    }
  }
  std::erase_if(sections, [](const TextSection& s) { return !s.token && s.text.empty(); });
  return sections;
}

std::vector<AddedToken> parse_added_tokens(const Json& list, const std::string& where) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) throw TokenizerError(where + ": expected an array, got " + json_kind(list));
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const Json& j = list[i];
    AddedToken t;
    t.content = require_string(j, "content", at);
    const Json& id = require_field(j, "id", at);
    if (!id.is_number_integer() || id.get<long long>() < 0)
      throw TokenizerError(at + ".id: expected a non-negative integer, got " + id.dump());
    t.id = id.get<std::int32_t>();
    t.special = optional_bool(j, "special", false, at);
    t.lstrip = optional_bool(j, "lstrip", false, at);
    t.rstrip = optional_bool(j, "rstrip", false, at);
    t.normalized = optional_bool(j, "normalized", !t.special, at);
    t.single_word = optional_bool(j, "single_word", false, at);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

}  // namespace nibble::tokenizer
