#include "engine/tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "engine/text/utf8.h"

namespace nibble::tokenizer {
namespace {

// Splits a merges entry, "a b" (legacy) or ["a", "b"] (tokenizers >= 0.20).
std::pair<std::string, std::string> parse_merge(const Json& entry, const std::string& where) {
  if (entry.is_string()) {
    const auto& s = entry.get_ref<const std::string&>();
    const auto space = s.find(' ', 1);
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
             entry[1].is_string()) {
    return {entry[0].get<std::string>(), entry[1].get<std::string>()};
  }
  throw TokenizerError(where + ": expected \"a b\" or [\"a\", \"b\"], got " + entry.dump());
}

}  // namespace

BpeModel::BpeModel(const Json& model, const std::string& where) {
  const std::string type = optional_string(model, "type", "BPE", where);
  if (type != "BPE")
    throw TokenizerError(where + ".type: unsupported model '" + type + "' (supported: BPE)");
  if (!optional_string(model, "continuing_subword_prefix", "", where).empty() ||
      !optional_string(model, "end_of_word_suffix", "", where).empty())
    throw TokenizerError(where +
                         ": continuing_subword_prefix / end_of_word_suffix are not supported");
  if (auto it = model.find("dropout");
      it != model.end() && !it->is_null() && it->get<double>() != 0.0)
    throw TokenizerError(where + ".dropout: BPE dropout is not supported (expected null)");

  const Json& vocab = require_field(model, "vocab", where);
  if (!vocab.is_object())
    throw TokenizerError(where + ".vocab: expected an object of token -> id, got " +
                         json_kind(vocab));
  vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() > INT32_MAX)
      throw TokenizerError(where + ".vocab[\"" + token +
                           "\"]: expected a non-negative integer id, got " + id.dump());
    add_token(token, id.get<TokenId>());
  }

  const Json& merges = require_field(model, "merges", where);
  if (!merges.is_array())
    throw TokenizerError(where + ".merges: expected an array, got " + json_kind(merges));
  merges_.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string at = where + ".merges[" + std::to_string(i) + "]";
    auto [a, b] = parse_merge(merges[i], at);
    auto ia = token_to_id(a), ib = token_to_id(b), im = token_to_id(a + b);
    if (!ia || !ib || !im)
      throw TokenizerError(at + ": merge '" + a + " " + b +
                           "' uses a token missing from the vocab");
    merges_.try_emplace(pair_key(*ia, *ib), Merge{static_cast<std::int32_t>(i), *im});
  }

  if (auto unk = optional_string(model, "unk_token", "", where); !unk.empty()) {
    unk_id_ = token_to_id(unk);
    if (!unk_id_) throw TokenizerError(where + ".unk_token: '" + unk + "' is not in the vocab");
  }
  byte_fallback_ = optional_bool(model, "byte_fallback", false, where);
  fuse_unk_ = optional_bool(model, "fuse_unk", false, where);
  ignore_merges_ = optional_bool(model, "ignore_merges", false, where);
  if (byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids_[b] = token_to_id(name).value_or(-1);
    }
  }
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::add_token(const std::string& token, TokenId id) {
  vocab_[token] = id;
  if (static_cast<std::size_t>(id) >= id_to_token_.size()) id_to_token_.resize(id + 1);
  id_to_token_[id] = token;
}

const std::string* BpeModel::id_to_token(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size()) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::emit_unknown(std::string_view ch, std::vector<TokenId>& out) const {
  // byte_fallback: <0xNN> per byte, if the vocab has all of them; otherwise unk.
  if (byte_fallback_ && std::all_of(ch.begin(), ch.end(), [&](char c) {
        return byte_ids_[static_cast<unsigned char>(c)] >= 0;
      })) {
    for (char c : ch) out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    return;
  }
  if (!unk_id_)
    throw TokenizerError(
        "text has a character outside the vocabulary and the model has no unk_token");
  // fuse_unk: consecutive unknowns become one unk.
  if (fuse_unk_ && !out.empty() && out.back() == *unk_id_) return;
  out.push_back(*unk_id_);
}

void BpeModel::encode(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const std::string key(word);
  {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kCacheCapacity) cache_.clear();
  cache_.emplace(key, std::move(ids));
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  // One symbol per character; characters outside the vocab stay as unknown symbols (id -1)
  // that never merge.
  struct Symbol {
    TokenId id;
    std::int32_t prev, next;
    std::string_view text;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (std::size_t pos = 0; pos < word.size();) {
    std::size_t n = nibble::text::utf8_sequence_length(static_cast<unsigned char>(word[pos]));
    if (pos + n > word.size()) n = word.size() - pos;
    const auto ch = word.substr(pos, n);
    const auto id = token_to_id(ch);
    const auto index = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id ? *id : -1, index - 1, index + 1, ch});
    pos += n;
  }
  symbols.back().next = -1;

  // Candidate merge of symbols[left] with its right neighbour; stale entries are skipped.
  struct Candidate {
    std::int32_t rank, left;
    TokenId left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push_pair = [&](std::int32_t left) {
    if (left < 0) return;
    const std::int32_t right = symbols[left].next;
    if (right < 0 || symbols[left].id < 0 || symbols[right].id < 0) return;
    auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != merges_.end())
      heap.push({it->second.rank, left, symbols[left].id, symbols[right].id});
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(symbols.size()); ++i) push_pair(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    if (left.id != c.left_id || left.next < 0) continue;  // left was merged away or changed
    Symbol& right = symbols[left.next];
    if (right.id != c.right_id) continue;
    left.id = merges_.at(pair_key(c.left_id, c.right_id)).merged;
    left.text = std::string_view(left.text.data(), left.text.size() + right.text.size());
    right.id = -2;  // dead
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    push_pair(left.prev);
    push_pair(c.left);
  }

  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) {
      out.push_back(symbols[i].id);
    } else {
      emit_unknown(symbols[i].text, out);
    }
  }
}

}  // namespace nibble::tokenizer
