#pragma once
// A compiled PCRE2 pattern in UTF mode with Unicode properties (\p{L}, \s as Unicode), as the
// Split pre-tokenizers and Replace normalizers of tokenizer.json need.
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

// Escapes a literal string for use inside a pattern.
std::string regex_escape(std::string_view literal);

}  // namespace nibble::tokenizer
