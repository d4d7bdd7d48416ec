#pragma once
// Reads the JSON of tool calls one byte at a time, as a model generates it, and says as early as
// the bytes allow what they hold: each call's name once its string closes, and its arguments
// as raw JSON text that grows with every byte. Strict JSON syntax (RFC 8259) is checked on the
// way, so that broken markup is found at its first bad byte.
//
// Shapes:
//   kCallObject  {"name": "f", "arguments": {...}}   ("parameters" is accepted for "arguments",
//                as Llama 3 writes it); other keys are ignored
//   kCallArray   [{"name": ...}, {"name": ...}]      (Mistral, tool_choice "required")
//   kArguments   any JSON value: the arguments alone (Mistral's name[ARGS]{...}, a named
//                tool_choice); the caller knows the name
// Arguments given as a JSON string ("arguments": "{\"a\": 1}") are reported decoded, once the
// string is complete.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::tool_calls {

class JsonCallScanner {
 public:
  enum class Shape { kCallObject, kCallArray, kArguments };
  enum class Status { kMore, kDone, kError };

  struct Call {
    std::optional<std::string> name;
    bool arguments_seen = false;
    bool arguments_complete = false;
    bool arguments_is_string = false;
    bool complete = false;  // kCallObject / kCallArray: its object closed
    std::size_t arguments_begin = 0, arguments_end = std::string::npos;  // into raw()
    std::string decoded_arguments;  // when arguments_is_string and complete
  };

  explicit JsonCallScanner(Shape shape) : shape_(shape) {}

  // Consumes one byte. After kDone or kError, further bytes are refused (kError).
  Status push(char c);
  Status status() const { return status_; }
  const std::string& error() const { return error_; }
  // Every byte pushed so far (the one that made an error included).
  const std::string& raw() const { return raw_; }
  const std::vector<Call>& calls() const { return calls_; }
  // The arguments' text known so far: raw JSON, or the decoded string once complete ("" while
  // a string is still open). A call that completed without arguments reports "{}".
  std::string_view arguments(const Call& call) const;

 private:
  enum class Expect { kValue, kKeyOrEnd, kKey, kColon, kCommaOrEnd, kValueOrEnd };
  enum class Lex { kNone, kString, kEscape, kUnicode, kNumber, kLiteral };
  struct Frame {
    bool object;
    Expect expect;
  };

  Status fail(std::string message);
  Status structural(char c, std::size_t pos);
  Status begin_value(char c, std::size_t pos);
  Status end_value(std::size_t end);  // a value ended at raw_[end - 1]
  Status lex(char c, std::size_t pos);
  bool number_is_valid() const;
  std::size_t call_depth() const { return shape_ == Shape::kCallArray ? 2 : 1; }
  bool in_call_frame() const {
    return shape_ != Shape::kArguments && stack_.size() == call_depth() && stack_.back().object;
  }

  Shape shape_;
  Status status_ = Status::kMore;
  std::string error_;
  std::string raw_;
  std::vector<Frame> stack_;
  bool top_started_ = false;
  Lex lex_ = Lex::kNone;
  bool string_is_key_ = false;
  int unicode_left_ = 0;
  std::string token_;  // the string, number or literal being read, raw
  std::string_view literal_;
  // Inside a call object: the key whose value comes next, and what that value is.
  std::string key_;
  enum class Role { kNone, kName, kArguments } role_ = Role::kNone;
  std::size_t role_depth_ = 0;
  std::vector<Call> calls_;
};

}  // namespace nibble::tool_calls
