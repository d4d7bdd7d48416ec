#pragma once
// The chat layer's one error type. A template that cannot be parsed, uses a construct this
// interpreter does not implement, or fails while rendering (undefined attribute, type error,
// raise_exception) throws TemplateError with the 1-based template line, so the caller never gets
// a silently wrong prompt. Bad inputs (messages JSON, tokenizer_config.json) throw it with line 0.
#include <stdexcept>
#include <string>

namespace nibble::chat {

class TemplateError : public std::runtime_error {
 public:
  TemplateError(const std::string& message, int line)
      : std::runtime_error(line > 0 ? "chat template line " + std::to_string(line) + ": " + message
                                    : message),
        line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

// What a template's raise_exception() throws: its message is the template author's, written for
// the user ("roles must alternate ..."), so a server may show it; other TemplateErrors describe
// the template's insides and stay in the server's log.
class TemplateRaised : public TemplateError {
 public:
  TemplateRaised(const std::string& message, int line)
      : TemplateError(message, line), message_(message) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

}  // namespace nibble::chat
