#include "engine/structured/regex_grammar.h"

#include <cstdio>
#include <string>
#include <vector>

#include "engine/structured/structured_error.h"
#include "engine/structured/utf8_ranges.h"

namespace nibble::structured {
namespace {

std::vector<CodePointRange> digit_ranges() {
  return {{'0', '9'}};
}
std::vector<CodePointRange> word_ranges() {
  return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
}
std::vector<CodePointRange> space_ranges() {
  return {{'\t', '\r'}, {' ', ' '}};
}

class RegexParser {
 public:
  RegexParser(GrammarBuilder& builder, std::string_view pattern, const RegexOptions& options)
      : b_(builder), s_(pattern), options_(options) {}

  Symbol parse() {
    bool anchored_start = false, anchored_end = false;
    if (!s_.empty() && s_.front() == '^') {
      anchored_start = true;
      ++pos_;
    }
    std::vector<Symbol> seq;
    if (!options_.implicit_anchors && !anchored_start) seq.push_back(any_string());
    seq.push_back(alternation(&anchored_end));
    if (pos_ < s_.size()) fail("unbalanced ')'", ")");
    if (!options_.implicit_anchors && !anchored_end) seq.push_back(any_string());
    const int rule = b_.new_rule("regex");
    b_.add_alternative(rule, seq);
    return Symbol::rule(rule);
  }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& construct) const {
    throw StructuredError(
        "regex '" + std::string(s_) + "' at offset " + std::to_string(pos_) + ": " + what,
        construct);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }

  // One UTF-8 code point from the pattern.
  std::uint32_t code_point() {
    const unsigned char c = (unsigned char)s_[pos_++];
    if (c < 0x80) return c;
    const int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    if (extra < 0 || pos_ + std::size_t(extra) > s_.size()) fail("invalid UTF-8", "utf-8");
    std::uint32_t cp = c & (0x3F >> extra);
    for (int i = 0; i < extra; ++i) cp = (cp << 6) | ((unsigned char)s_[pos_++] & 0x3F);
    return cp;
  }

  Symbol alternation(bool* anchored_end) {
    std::vector<std::vector<Symbol>> alts;
    alts.push_back(concatenation(anchored_end));
    while (!at_end() && peek() == '|') {
      ++pos_;
      alts.push_back(concatenation(anchored_end));
    }
    return b_.choice("regex|", alts);
  }

  std::vector<Symbol> concatenation(bool* anchored_end) {
    std::vector<Symbol> seq;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (anchored_end != nullptr && at_end()) {
          *anchored_end = true;
          break;
        }
        fail("'$' is supported only at the end of the pattern", "$");
      }
      if (peek() == '^') fail("'^' is supported only at the start of the pattern", "^");
      Symbol atom_symbol = atom();
      seq.push_back(quantified(atom_symbol));
    }
    return seq;
  }

  Symbol quantified(Symbol atom_symbol) {
    while (!at_end()) {
      int min = 0, max = -1;
      const char c = peek();
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{' && counted(min, max)) {
      } else {
        break;
      }
      if (!at_end() && peek() == '?') ++pos_;  // lazy: the same set of strings
      if (!at_end() && peek() == '+') fail("possessive quantifiers are not supported", "++");
      if (min > options_.max_repeat || max > options_.max_repeat) {
        fail(
            "repetition counts above " + std::to_string(options_.max_repeat) + " are not supported",
            "{m,n}");
      }
      atom_symbol = b_.repeat("regex{}", atom_symbol, min, max);
    }
    return atom_symbol;
  }

  // {m}, {m,}, {m,n}; false (and nothing consumed) when the brace is a literal.
  bool counted(int& min, int& max) {
    std::size_t p = pos_ + 1;
    auto number = [&](int& out) {
      const std::size_t start = p;
      long long v = 0;
      while (p < s_.size() && s_[p] >= '0' && s_[p] <= '9') {
        v = v * 10 + (s_[p++] - '0');
        if (v > 1000000) v = 1000000;
      }
      out = int(v);
      return p > start;
    };
    if (!number(min)) return false;
    max = min;
    if (p < s_.size() && s_[p] == ',') {
      ++p;
      if (!number(max)) max = -1;
    }
    if (p >= s_.size() || s_[p] != '}') return false;
    pos_ = p + 1;
    if (max >= 0 && max < min) fail("{m,n} with n < m", "{m,n}");
    return true;
  }

  Symbol atom() {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (!at_end() && peek() == '?') {
        ++pos_;
        if (!at_end() && peek() == ':') {
          ++pos_;
        } else if (!at_end() && (peek() == '<' || peek() == 'P') && s_.substr(pos_, 2) != "<=" &&
                   s_.substr(pos_, 2) != "<!") {
          // Named group: (?<name>...) or (?P<name>...)
          const std::size_t close = s_.find('>', pos_);
          if (close == std::string_view::npos) fail("unterminated group name", "(?<");
          pos_ = close + 1;
        } else {
          fail("lookaround and inline flags are not supported", "(?");
        }
      }
      if (depth_ >= options_.max_depth) {
        fail("groups nest more than " + std::to_string(options_.max_depth) +
                 " levels deep; the limit is " + std::to_string(options_.max_depth),
             "(");
      }
      ++depth_;
      Symbol inner = alternation(nullptr);
      --depth_;
      if (at_end() || peek() != ')') fail("missing ')'", "(");
      ++pos_;
      return inner;
    }
    if (c == '[') return char_set(bracket_class());
    if (c == '.') {
      ++pos_;
      return char_set(complement_ranges({{'\n', '\n'}}));
    }
    if (c == '*' || c == '+' || c == '?') fail("quantifier without anything to repeat", {c});
    if (c == '{') {
      int min = 0, max = 0;
      const std::size_t saved = pos_;
      if (counted(min, max)) {
        pos_ = saved;
        fail("quantifier without anything to repeat", "{m,n}");
      }
    }
    if (c == '\\') return char_set(escape(false));
    const std::uint32_t cp = code_point();
    return char_set({{cp, cp}});
  }

  // The escape after '\': a class like \d, or one character.
  std::vector<CodePointRange> escape(bool in_class) {
    ++pos_;
    if (at_end()) fail("trailing backslash", "\\");
    const char c = s_[pos_++];
    switch (c) {
      case 'd':
        return digit_ranges();
      case 'D':
        return complement_ranges(digit_ranges());
      case 'w':
        return normalize_ranges(word_ranges());
      case 'W':
        return complement_ranges(normalize_ranges(word_ranges()));
      case 's':
        return space_ranges();
      case 'S':
        return complement_ranges(space_ranges());
      case 'n':
        return {{'\n', '\n'}};
      case 't':
        return {{'\t', '\t'}};
      case 'r':
        return {{'\r', '\r'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case '0':
        return {{0, 0}};
      case 'x':
      case 'u': {
        const int digits = c == 'x' ? 2 : 4;
        if (pos_ + std::size_t(digits) > s_.size()) fail("short \\x or \\u escape", {'\\', c});
        // Exactly `digits` hex digits (std::stoul would take a sign or spaces, or throw).
        std::uint32_t cp = 0;
        for (int i = 0; i < digits; ++i) {
          const char h = s_[pos_++];
          const int v = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
          if (v < 0) fail("\\x and \\u take hex digits", {'\\', c});
          cp = cp * 16 + std::uint32_t(v);
        }
        return {{cp, cp}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        fail("word boundaries are not supported", "\\b");
      case 'B':
        fail("word boundaries are not supported", "\\B");
      default:
        break;
    }
    if (c >= '1' && c <= '9') fail("backreferences are not supported", std::string("\\") + c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      fail(std::string("unknown escape \\") + c, std::string("\\") + c);
    }
    --pos_;
    const std::uint32_t cp = code_point();
    return {{cp, cp}};
  }

  // One member of a bracket class: an escape (maybe a class like \d) or one character.
  std::vector<CodePointRange> class_item() {
    if (peek() == '\\') return escape(true);
    const std::uint32_t cp = code_point();
    return {{cp, cp}};
  }

  std::vector<CodePointRange> bracket_class() {
    ++pos_;  // '['
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodePointRange> ranges;
    bool first = true;
    while (true) {
      if (at_end()) fail("missing ']'", "[");
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (s_.substr(pos_, 2) == "[:") fail("POSIX classes are not supported", "[:");
      std::vector<CodePointRange> item = class_item();
      // A range a-b (a '-' before ']' is a literal).
      if (item.size() == 1 && item[0].first == item[0].second && pos_ + 1 < s_.size() &&
          peek() == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        const std::vector<CodePointRange> end_item = class_item();
        if (end_item.size() != 1 || end_item[0].first != end_item[0].second) {
          fail("a class cannot end a range", "[a-\\d]");
        }
        if (end_item[0].first < item[0].first) fail("range out of order", "[z-a]");
        item = {{item[0].first, end_item[0].first}};
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    ranges = normalize_ranges(ranges);
    return negated ? complement_ranges(ranges) : ranges;
  }

  // Any string (for unanchored patterns): .* over all characters including newlines.
  Symbol any_string() { return b_.repeat("regex-any", char_set({{0, kMaxCodePoint}}), 0, -1); }

  // One character from `ranges`, as raw UTF-8 or as it appears inside a JSON string.
  Symbol char_set(std::vector<CodePointRange> ranges) {
    ranges = normalize_ranges(std::move(ranges));
    std::vector<std::vector<Symbol>> alts;
    for (const CodePointRange& r : ranges) {
      if (!options_.json_string_content) {
        utf8_sequences(b_, r.first, r.second, alts);
        continue;
      }
      // Split off what JSON must escape: controls, '"' and '\'.
      std::uint32_t lo = r.first;
      for (std::uint32_t cp = r.first; cp <= r.second && cp < 0x80; ++cp) {
        if (cp < 0x20 || cp == '"' || cp == '\\') {
          if (lo < cp) utf8_sequences(b_, lo, cp - 1, alts);
          lo = cp + 1;
          alts.push_back({b_.literal(json_escape(cp))});
        }
      }
      if (lo <= r.second) utf8_sequences(b_, lo, r.second, alts);
    }
    if (alts.empty()) fail("an empty character class matches nothing", "[]");
    return b_.choice("regex-char", alts);
  }

  static std::string json_escape(std::uint32_t cp) {
    switch (cp) {
      case '"':
        return "\\\"";
      case '\\':
        return "\\\\";
      case '\n':
        return "\\n";
      case '\t':
        return "\\t";
      case '\r':
        return "\\r";
      case '\b':
        return "\\b";
      case '\f':
        return "\\f";
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(cp));
        return buf;
      }
    }
  }

  GrammarBuilder& b_;
  std::string_view s_;
  RegexOptions options_;
  std::size_t pos_ = 0;
  int depth_ = 0;  // groups open at pos_
};

}  // namespace

Symbol compile_regex(GrammarBuilder& builder, std::string_view pattern,
                     const RegexOptions& options) {
  return RegexParser(builder, pattern, options).parse();
}

}  // namespace nibble::structured
