#include "engine/structured/token_vocabulary.h"

#include <algorithm>

#include "engine/tokenizer/tokenizer.h"

namespace nibble::structured {

TokenVocabulary::TokenVocabulary(std::vector<std::optional<std::string>> bytes,
                                 std::vector<int> eos_ids)
    : bytes_(std::move(bytes)), eos_ids_(std::move(eos_ids)) {
  for (std::size_t id = 0; id < bytes_.size(); ++id) {
    if (is_eos(int(id))) bytes_[id].reset();  // EOS is decided by completeness, not bytes
    // Longer than a trie node's depth can say: no tokenizer has one; never allowed.
    if (bytes_[id] && (bytes_[id]->empty() || bytes_[id]->size() > 0xffff)) continue;
    if (bytes_[id]) sorted_.push_back(int(id));
  }
  std::sort(sorted_.begin(), sorted_.end(), [this](int a, int b) {
    return *bytes_[std::size_t(a)] < *bytes_[std::size_t(b)] ||
           (*bytes_[std::size_t(a)] == *bytes_[std::size_t(b)] && a < b);
  });
  build_trie();
}

void TokenVocabulary::build_trie() {
  // open[d]: the node at depth d on the path to the previous token, still missing its end.
  std::vector<std::uint32_t> open;
  const std::string* previous = nullptr;
  for (std::size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& bytes = *bytes_[std::size_t(sorted_[i])];
    std::size_t shared = 0;
    if (previous) {
      while (shared < previous->size() && shared < bytes.size() &&
             (*previous)[shared] == bytes[shared]) {
        ++shared;
      }
    }
    while (open.size() > shared) {
      trie_[open.back()].subtree_end = std::uint32_t(trie_.size());
      open.pop_back();
    }
    // The token's own node is the last one created here, or (same bytes as the previous
    // token) the previous token's, which has no children yet: sorted order puts extensions
    // after all equal strings.
    for (std::size_t d = shared; d < bytes.size(); ++d) {
      open.push_back(std::uint32_t(trie_.size()));
      trie_.push_back({0, std::uint32_t(i), std::uint16_t(d), (unsigned char)bytes[d], {}});
    }
    max_token_bytes_ = std::max(max_token_bytes_, bytes.size());
    previous = &bytes;
  }
  for (std::uint32_t node : open) trie_[node].subtree_end = std::uint32_t(trie_.size());
  measure_class_heights();
  trie_.push_back({std::uint32_t(trie_.size()) + 1, std::uint32_t(sorted_.size()), 0, 0, {}});
}

const std::array<ByteSet, kNumTokenByteClasses>& token_byte_classes() {
  static const std::array<ByteSet, kNumTokenByteClasses> classes = [] {
    std::array<ByteSet, kNumTokenByteClasses> c;
    c[0].add_range(0x20, 0x7e);
    c[0].bits[0x22 >> 6] &= ~(std::uint64_t(1) << (0x22 & 63));  // '"'
    c[0].bits[0x5c >> 6] &= ~(std::uint64_t(1) << (0x5c & 63));  // '\\'
    c[1].add_range('0', '9');
    c[1].add_range('A', 'Z');
    c[1].add_range('a', 'z');
    c[2].add_range('0', '9');
    return c;
  }();
  return classes;
}

void TokenVocabulary::measure_class_heights() {
  const auto& classes = token_byte_classes();
  // Children come after their parent in pre-order, so a backward pass sees them first.
  for (std::size_t k = trie_.size(); k-- > 0;) {
    TrieNode& node = trie_[k];
    for (int c = 0; c < kNumTokenByteClasses; ++c) {
      if (!classes[std::size_t(c)].contains(node.byte)) continue;
      int height = 1;
      for (std::size_t child = k + 1; child < node.subtree_end; child = trie_[child].subtree_end) {
        const int h = trie_[child].class_height[std::size_t(c)];
        height = h == 0 ? 0 : std::max(height, h + 1);
        if (height == 0) break;
      }
      node.class_height[std::size_t(c)] = std::uint8_t(height > 255 ? 0 : height);
    }
  }
}

bool TokenVocabulary::is_eos(int id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(
    const tokenizer::Tokenizer& tok, std::size_t vocab_size, std::vector<int> eos_ids,
    const std::vector<std::string>& allowed_special) {
  std::vector<std::optional<std::string>> bytes(vocab_size);
  for (std::size_t id = 0; id < vocab_size; ++id) {
    if (!tok.contains(int(id))) continue;
    if (tok.is_special(int(id))) {
      const std::string text = tok.decode({int(id)}, {.skip_special_tokens = false});
      if (std::find(allowed_special.begin(), allowed_special.end(), text) != allowed_special.end())
        bytes[id] = text;
      continue;
    }
    // Not at the start of the output: the prompt always precedes generated tokens.
    bytes[id] = tok.decode_token_bytes(int(id), false);
  }
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::move(eos_ids));
}

}  // namespace nibble::structured
