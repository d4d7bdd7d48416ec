#pragma once
// A compiled Jinja2 template: parse once, render many times with different variables.
// Rendering follows Jinja2 3.1 as transformers configures it for chat templates (see
// template_lexer.h for whitespace handling, template_builtins.h for filters and functions).
// Errors (parse or render) throw TemplateError with the template line.
#include <memory>
#include <string>
#include <string_view>

#include "engine/chat/template_ast.h"
#include "engine/chat/template_value.h"

namespace nibble::chat {

class JinjaTemplate {
 public:
  explicit JinjaTemplate(std::string_view source);
  // variables: the template's globals (messages, add_generation_prompt, ...).
  std::string render(const ValueDict& variables) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace nibble::chat
