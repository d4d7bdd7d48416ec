#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/pcre_regex.h"

#include <pcre2.h>

#include "engine/tokenizer/tokenizer_error.h"

namespace nibble::tokenizer {

namespace {

// The members of \s in JavaScript (transformers.js runs these patterns as JS RegExps). PCRE2's
// own \s differs: it adds U+0085 and U+180E and lacks U+FEFF, which changes ids on such text.
constexpr const char* kJsWhitespace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{"
    "205F}"
    "\\x{3000}\\x{FEFF}";

// Rewrites \s and \S (outside classes) and \s (inside classes) to the JS set above. \S
// inside a class is left to PCRE2; none of the supported tokenizer files use it.
std::string with_js_whitespace(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kJsWhitespace) : "[" + std::string(kJsWhitespace) + "]";
      } else if (next == 'S' && !in_class) {
        out += "[^" + std::string(kJsWhitespace) + "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct PcreRegex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

PcreRegex::PcreRegex(const std::string& pattern, const std::string& where)
    : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UTF: patterns hold non-ASCII literals (DeepSeek's CJK ranges); UCP: \s \w \d are Unicode.
  const std::string rewritten = with_js_whitespace(pattern);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw TokenizerError(where + ": regex does not compile at offset " + std::to_string(offset) +
                         ": " + reinterpret_cast<const char*>(message));
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
    const int rc =
        pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
    const std::size_t b = ov[0], e = ov[1];
    if (e > b) {
      matches.emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step over one whole character.
      start = e + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
        ++start;
    }
  }
  pcre2_match_data_free(data);
  return matches;
}

TextPattern TextPattern::literal(std::string text) {
  TextPattern p;
  p.literal_ = std::move(text);
  return p;
}

TextPattern TextPattern::regex(const std::string& pattern, const std::string& where) {
  TextPattern p;
  p.regex_ = std::make_shared<PcreRegex>(pattern, where);
  return p;
}

std::vector<std::pair<std::size_t, std::size_t>> TextPattern::find_all(
    std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  if (literal_.empty()) return matches;
  for (std::size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos)) {
    matches.emplace_back(pos, pos + literal_.size());
    pos += literal_.size();
  }
  return matches;
}

std::string TextPattern::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  out.reserve(text.size());
  std::size_t last = 0;
  for (auto [b, e] : find_all(text)) {
    out.append(text.substr(last, b - last));
    out.append(content);
    last = e;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace nibble::tokenizer
