#pragma once
// Splits a Jinja2 template into tokens: literal text and the contents of {{ }} / {% %} tags
// ({# #} comments are dropped). Whitespace control follows Jinja2 with the settings
// transformers compiles chat templates with (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False): "-" on a tag strips all whitespace on that side, "+" disables
// trim/lstrip, a block or comment tag eats the one newline after it, and spaces/tabs before a
// block or comment tag that starts its line are dropped.
#include <string>
#include <string_view>
#include <vector>

namespace nibble::chat {

struct Token {
  enum class Type {
    Text,
    VarBegin,
    VarEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Int,
    Float,
    Op,
    End
  };
  Type type;
  std::string text;  // Text: the literal; String: unescaped value; others: spelling
  int line;
};

// Throws TemplateError (with the line) on an unterminated tag, string or comment.
std::vector<Token> tokenize_template(std::string_view source);

}  // namespace nibble::chat
