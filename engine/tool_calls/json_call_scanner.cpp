#include "engine/tool_calls/json_call_scanner.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace nibble::tool_calls {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// A complete JSON string literal (quotes included) → its text; nullopt where the syntax the
// scanner checked still does not decode (a lone UTF-16 surrogate escape, invalid UTF-8).
std::optional<std::string> decode_string(std::string_view literal) {
  const nlohmann::json j = nlohmann::json::parse(literal, nullptr, /*allow_exceptions=*/false);
  if (!j.is_string()) return std::nullopt;
  return j.get<std::string>();
}

}  // namespace

JsonCallScanner::Status JsonCallScanner::fail(std::string message) {
  status_ = Status::kError;
  error_ = std::move(message) + " at byte " + std::to_string(raw_.size() - 1);
  return status_;
}

JsonCallScanner::Status JsonCallScanner::push(char c) {
  if (status_ != Status::kMore) return Status::kError;
  const std::size_t pos = raw_.size();
  raw_ += c;
  return lex_ != Lex::kNone ? lex(c, pos) : structural(c, pos);
}

std::string_view JsonCallScanner::arguments(const Call& call) const {
  if (!call.arguments_seen) return call.complete ? std::string_view("{}") : std::string_view();
  if (call.arguments_is_string) {
    return call.arguments_complete ? std::string_view(call.decoded_arguments) : std::string_view();
  }
  const std::size_t end = std::min(call.arguments_end, raw_.size());
  return std::string_view(raw_).substr(call.arguments_begin, end - call.arguments_begin);
}

JsonCallScanner::Status JsonCallScanner::structural(char c, std::size_t pos) {
  if (is_space(c)) return Status::kMore;
  if (stack_.empty()) {
    if (top_started_) return fail("unexpected data after the value");
    top_started_ = true;
    if (shape_ == Shape::kCallObject && c != '{') return fail("expected a tool call object");
    if (shape_ == Shape::kCallArray && c != '[') return fail("expected an array of tool calls");
    return begin_value(c, pos);
  }
  Frame& f = stack_.back();
  switch (f.expect) {
    case Expect::kValue:
      return begin_value(c, pos);
    case Expect::kValueOrEnd:
      if (c == ']') {
        stack_.pop_back();
        return end_value(pos + 1);
      }
      return begin_value(c, pos);
    case Expect::kKeyOrEnd:
    case Expect::kKey:
      if (c == '}' && f.expect == Expect::kKeyOrEnd) break;
      if (c != '"') return fail("expected a quoted key");
      lex_ = Lex::kString;
      string_is_key_ = true;
      token_ = "\"";
      return Status::kMore;
    case Expect::kColon:
      if (c != ':') return fail("expected ':'");
      f.expect = Expect::kValue;
      return Status::kMore;
    case Expect::kCommaOrEnd:
      if (c == ',') {
        f.expect = f.object ? Expect::kKey : Expect::kValue;
        return Status::kMore;
      }
      if (c != (f.object ? '}' : ']'))
        return fail(f.object ? "expected ',' or '}'" : "expected ',' or ']'");
      break;
  }
  // The current container closes.
  if (in_call_frame()) {
    Call& call = calls_.back();
    if (!call.name) return fail("a tool call object has no \"name\"");
    call.complete = true;
  }
  stack_.pop_back();
  return end_value(pos + 1);
}

JsonCallScanner::Status JsonCallScanner::begin_value(char c, std::size_t pos) {
  if (shape_ == Shape::kArguments && stack_.empty()) {
    calls_.emplace_back();
    calls_.back().arguments_seen = true;
    calls_.back().arguments_begin = pos;
    calls_.back().arguments_is_string = c == '"';
    role_ = Role::kArguments;
    role_depth_ = 0;
  } else if (in_call_frame()) {
    if (key_ == "name") {
      if (c != '"') return fail("a tool call's \"name\" must be a string");
      role_ = Role::kName;
      role_depth_ = stack_.size();
    } else if (key_ == "arguments" || key_ == "parameters") {
      Call& call = calls_.back();
      call = Call{.name = call.name,
                  .arguments_seen = true,
                  .arguments_is_string = c == '"',
                  .arguments_begin = pos};
      role_ = Role::kArguments;
      role_depth_ = stack_.size();
    }
  }
  if (shape_ == Shape::kCallArray && stack_.size() == 1 && c != '{') {
    return fail("expected a tool call object in the array");
  }
  switch (c) {
    case '{':
      stack_.push_back({true, Expect::kKeyOrEnd});
      if (shape_ != Shape::kArguments && stack_.size() == call_depth()) calls_.emplace_back();
      return Status::kMore;
    case '[':
      stack_.push_back({false, Expect::kValueOrEnd});
      return Status::kMore;
    case '"':
      lex_ = Lex::kString;
      string_is_key_ = false;
      token_ = "\"";
      return Status::kMore;
    case 't':
      literal_ = "true";
      break;
    case 'f':
      literal_ = "false";
      break;
    case 'n':
      literal_ = "null";
      break;
    default:
      if (c == '-' || is_digit(c)) {
        lex_ = Lex::kNumber;
        token_ = std::string(1, c);
        return Status::kMore;
      }
      return fail(std::string("unexpected character '") + c + "'");
  }
  lex_ = Lex::kLiteral;
  token_ = std::string(1, c);
  return Status::kMore;
}

JsonCallScanner::Status JsonCallScanner::end_value(std::size_t end) {
  if (role_ != Role::kNone && stack_.size() == role_depth_) {
    Call& call = calls_.back();
    if (role_ == Role::kName) {
      call.name = decode_string(token_);
      if (!call.name) return fail("a name that does not decode");
    } else {
      call.arguments_end = end;
      call.arguments_complete = true;
      if (call.arguments_is_string) {
        const auto decoded = decode_string(
            std::string_view(raw_).substr(call.arguments_begin, end - call.arguments_begin));
        if (!decoded) return fail("arguments that do not decode");
        call.decoded_arguments = *decoded;
      }
    }
    role_ = Role::kNone;
  }
  if (stack_.empty()) {
    status_ = Status::kDone;
    return status_;
  }
  stack_.back().expect = Expect::kCommaOrEnd;
  return Status::kMore;
}

bool JsonCallScanner::number_is_valid() const {
  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  std::size_t i = 0;
  const std::string& s = token_;
  auto digits = [&] {
    const std::size_t start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    return i > start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

JsonCallScanner::Status JsonCallScanner::lex(char c, std::size_t pos) {
  switch (lex_) {
    case Lex::kString:
      token_ += c;
      if (c == '\\') {
        lex_ = Lex::kEscape;
      } else if (c == '"') {
        lex_ = Lex::kNone;
        if (!string_is_key_) return end_value(pos + 1);
        if (in_call_frame()) {
          const auto key = decode_string(token_);
          if (!key) return fail("a key that does not decode");
          key_ = *key;
        }
        stack_.back().expect = Expect::kColon;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return fail("a control character inside a string");
      }
      return Status::kMore;
    case Lex::kEscape:
      token_ += c;
      if (c == 'u') {
        lex_ = Lex::kUnicode;
        unicode_left_ = 4;
      } else if (std::string_view("\"\\/bfnrt").find(c) != std::string_view::npos) {
        lex_ = Lex::kString;
      } else {
        return fail(std::string("an invalid escape '\\") + c + "'");
      }
      return Status::kMore;
    case Lex::kUnicode:
      token_ += c;
      if (!is_hex(c)) return fail("an invalid \\u escape");
      if (--unicode_left_ == 0) lex_ = Lex::kString;
      return Status::kMore;
    case Lex::kNumber: {
      if (is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
        token_ += c;
        return Status::kMore;
      }
      if (!number_is_valid()) return fail("an invalid number '" + token_ + "'");
      lex_ = Lex::kNone;
      if (end_value(pos) == Status::kDone) {
        // A bare number was the whole value: only whitespace may follow it.
        if (!is_space(c)) return fail("unexpected data after the value");
        return Status::kDone;
      }
      return structural(c, pos);
    }
    case Lex::kLiteral:
      token_ += c;
      if (!literal_.starts_with(token_)) return fail("an invalid literal '" + token_ + "'");
      if (token_.size() == literal_.size()) {
        lex_ = Lex::kNone;
        return end_value(pos + 1);
      }
      return Status::kMore;
    case Lex::kNone:
      break;
  }
  return structural(c, pos);
}

}  // namespace nibble::tool_calls
