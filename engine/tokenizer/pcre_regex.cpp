#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/pcre_regex.h"

#include <pcre2.h>

#include "engine/tokenizer/tokenizer_error.h"

namespace nibble::tokenizer {

struct PcreRegex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

PcreRegex::PcreRegex(const std::string& pattern, const std::string& where) : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UTF: patterns hold non-ASCII literals (DeepSeek's CJK ranges); UCP: \s \w \d are Unicode.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw TokenizerError(where + ": regex does not compile at offset " + std::to_string(offset) + ": " +
                         reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // optional speed-up; falls back silently
}

PcreRegex::~PcreRegex() = default;

std::vector<std::pair<std::size_t, std::size_t>> PcreRegex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start <= text.size()) {
    // Input was sanitized to valid UTF-8 before it reaches any pattern.
    const int rc = pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
    const std::size_t b = ov[0], e = ov[1];
    if (e > b) {
      matches.emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step over one whole character.
      start = e + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
  pcre2_match_data_free(data);
  return matches;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#&~ ").find(c) != std::string_view::npos && c != ' ') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace nibble::tokenizer
