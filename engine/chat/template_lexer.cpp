#include "engine/chat/template_lexer.h"

#include <cctype>
#include <cstdlib>

#include "engine/chat/template_error.h"
#include "engine/text/utf8.h"

namespace nibble::chat {
namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    // keep_trailing_newline=False: Jinja2 drops one trailing newline of the source.
    if (src_.ends_with("\r\n"))
      src_.remove_suffix(2);
    else if (src_.ends_with("\n"))
      src_.remove_suffix(1);
  }

  std::vector<Token> run() {
    bool strip_next_text = false;  // previous tag ended with "-"
    bool trim_newline = false;     // previous tag was a block/comment (trim_blocks)
    while (pos_ < src_.size()) {
      size_t open = find_tag_open(pos_);
      std::string text(src_.substr(pos_, open - pos_));
      // Whether the text begins a line once the previous tag has eaten what it eats.
      bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
      const int text_line = line_;
      count_lines(pos_, open);
      pos_ = open;
      if (strip_next_text) {
        size_t k = 0;
        while (k < text.size() && is_ws(text[k])) ++k;
        if (k > 0) line_starting = text[k - 1] == '\n';
        text.erase(0, k);
      } else if (trim_newline) {
        const size_t eaten = text.starts_with("\r\n") ? 2 : text.starts_with("\n") ? 1 : 0;
        if (eaten) line_starting = true;
        text.erase(0, eaten);
      }
      if (open < src_.size()) {
        const char kind = src_[open + 1];
        const char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
        if (modifier == '-') {
          while (!text.empty() && is_ws(text.back())) text.pop_back();
        } else if (modifier != '+' && (kind == '%' || kind == '#')) {
          lstrip_block(text, line_starting);
        }
      }
      if (!text.empty()) tokens_.push_back({Token::Type::Text, text, text_line});
      if (open >= src_.size()) break;
      lex_tag(strip_next_text, trim_newline);
    }
    tokens_.push_back({Token::Type::End, "", line_});
    return std::move(tokens_);
  }

 private:
  // Jinja2 strips only the spaces/tabs after the last newline of the text, and only when that
  // run begins a line.
  static void lstrip_block(std::string& text, bool text_starts_line) {
    const size_t nl = text.rfind('\n');
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    if (nl == std::string::npos && !text_starts_line) return;
    for (size_t k = from; k < text.size(); ++k)
      if (text[k] != ' ' && text[k] != '\t') return;
    text.erase(from);
  }

  size_t find_tag_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < src_.size(); ++i)
      if (src_[i] == '\n') ++line_;
  }

  [[noreturn]] void fail(const std::string& msg) const { throw TemplateError(msg, line_); }

  void lex_tag(bool& strip_next_text, bool& trim_newline) {
    const char kind = src_[pos_ + 1];
    pos_ += 2;
    if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
    strip_next_text = false;
    trim_newline = false;
    if (kind == '#') {
      const size_t close = src_.find("#}", pos_);
      if (close == std::string_view::npos) fail("unterminated comment '{#'");
      strip_next_text = close > pos_ && src_[close - 1] == '-';
      trim_newline = !(close > pos_ && src_[close - 1] == '+');
      count_lines(pos_, close);
      pos_ = close + 2;
      return;
    }
    const bool is_var = kind == '{';
    const char close_char = is_var ? '}' : '%';
    tokens_.push_back({is_var ? Token::Type::VarBegin : Token::Type::BlockBegin, "", line_});
    int depth = 0;  // open brackets: "}" closes the tag only at depth 0
    while (true) {
      while (pos_ < src_.size() && is_ws(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size())
        fail(std::string("unterminated tag, expected '") + close_char + "}'");
      const std::string_view rest = src_.substr(pos_);
      if (depth == 0) {
        const char c0 = rest[0];
        if ((c0 == '-' || c0 == '+') && rest.size() >= 3 && rest[1] == close_char &&
            rest[2] == '}') {
          strip_next_text = c0 == '-';
          pos_ += 3;
          break;
        }
        if (rest.size() >= 2 && rest[0] == close_char && rest[1] == '}') {
          trim_newline = !is_var;
          pos_ += 2;
          break;
        }
      }
      lex_expression_token(depth);
    }
    tokens_.push_back({is_var ? Token::Type::VarEnd : Token::Type::BlockEnd, "", line_});
  }

  void lex_expression_token(int& depth) {
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
        ++end;
      tokens_.push_back({Token::Type::Name, std::string(src_.substr(pos_, end - pos_)), line_});
      pos_ = end;
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number();
    if (c == '\'' || c == '"') return lex_string(c);
    static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                 "/",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                 "<",  ">",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOps) {
      const std::string_view o(op);
      if (src_.substr(pos_).starts_with(o)) {
        if (o == "(" || o == "[" || o == "{") ++depth;
        if (o == ")" || o == "]" || o == "}") --depth;
        tokens_.push_back({Token::Type::Op, std::string(o), line_});
        pos_ += o.size();
        return;
      }
    }
    fail(std::string("unexpected character '") + c + "' in tag");
  }

  void lex_number() {
    size_t end = pos_;
    bool is_float = false;
    auto digits = [&] {
      while (end < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
        ++end;
    };
    digits();
    if (end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        end = e;
        digits();
      }
    }
    std::string text;
    for (char ch : src_.substr(pos_, end - pos_))
      if (ch != '_') text += ch;
    tokens_.push_back({is_float ? Token::Type::Float : Token::Type::Int, text, line_});
    pos_ = end;
  }

  void lex_string(char quote) {
    const int start_line = line_;
    std::string out;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= src_.size()) throw TemplateError("unterminated string literal", start_line);
      const char ch = src_[i];
      if (ch == quote) break;
      if (ch == '\n') ++line_;
      if (ch != '\\' || i + 1 >= src_.size()) {
        out += ch;
        ++i;
        continue;
      }
      const char esc = src_[i + 1];
      i += 2;
      switch (esc) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '0':
          out += '\0';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case 'a':
          out += '\a';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\n':
          ++line_;
          break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = esc == 'x' ? 2 : esc == 'u' ? 4 : 8;
          if (i + n > src_.size())
            throw TemplateError("truncated \\" + std::string(1, esc) + " escape", line_);
          const std::string hex(src_.substr(i, n));
          char* endp = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &endp, 16);
          if (endp != hex.c_str() + n)
            throw TemplateError("bad \\" + std::string(1, esc) + " escape", line_);
          nibble::text::append_utf8(out, static_cast<char32_t>(cp));
          i += n;
          break;
        }
        default:  // Python keeps unknown escapes verbatim
          out += '\\';
          out += esc;
      }
    }
    tokens_.push_back({Token::Type::String, out, start_line});
    pos_ = i + 1;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize_template(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace nibble::chat
