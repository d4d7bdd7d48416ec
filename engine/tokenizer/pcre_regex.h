#pragma once
// A compiled PCRE2 pattern in UTF mode with Unicode properties (\p{L}), as the Split
// pre-tokenizers and Replace normalizers of tokenizer.json need. \s means what it means in
// JavaScript (the transformers.js oracle), not PCRE2's slightly different set.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nibble::tokenizer {

class PcreRegex {
 public:
  // Throws TokenizerError naming `where` and PCRE2's message if the pattern does not compile.
  PcreRegex(const std::string& pattern, const std::string& where);
  ~PcreRegex();
  PcreRegex(const PcreRegex&) = delete;
  PcreRegex& operator=(const PcreRegex&) = delete;

  // Non-overlapping matches, left to right, as [begin, end) byte offsets; empty matches skipped.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The `pattern` field of Split / Replace steps: {"String": literal} or {"Regex": pcre}.
class TextPattern {
 public:
  // `pattern` is the JSON object's text form already parsed by the caller.
  static TextPattern literal(std::string text);
  static TextPattern regex(const std::string& pattern, const std::string& where);

  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;
  // Replaces every match with `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<PcreRegex> regex_;
};

}  // namespace nibble::tokenizer
