#pragma once
// Parses the tokens of a chat template into statements (see template_ast.h). Supported tags:
// if/elif/else, for (with else, tuple targets and an inline "if" filter), set (expression,
// namespace attribute, block form), break/continue (transformers enables loopcontrols) and
// generation (transformers' assistant-mask tag, rendered as its body) and macro (positional and
// keyword parameters with defaults; no varargs/kwargs/caller). Anything else (call, include,
// extends, import, raw, filter blocks, ...) throws TemplateError with its line.
#include <string_view>

#include "engine/chat/template_ast.h"

namespace nibble::chat {

Body parse_template(std::string_view source);

}  // namespace nibble::chat
