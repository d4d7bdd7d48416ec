#pragma once
// The messages of a chat request made ready for the model's chat template.
//  - Roles: those the OpenAI API defines (system, developer, user, assistant, tool, function);
//    any other is a 400 naming it, where a template would drop or mangle it silently.
//  - Content as a list of parts becomes one string: text (and assistant refusal) parts joined
//    in order with "\n", as vLLM does for text-only models, since templates expect a string.
//    Image, audio, file and any other parts are a 400 naming the part's type: this engine
//    serves text-only models. Null or absent content becomes "" (as in vLLM).
// Every error is an ApiError 400 with param "messages" and the message's index.
#include <nlohmann/json.hpp>

#include <string_view>

namespace nibble::server {

// Validates and normalizes; other fields of each message (name, tool_calls, ...) are kept.
nlohmann::json normalize_chat_messages(const nlohmann::json& messages);

// Roles a template does not name are given the role it knows for them: `developer` (OpenAI's
// newer name for system instructions) becomes `system`, `function` (the deprecated form of a
// tool result) becomes `tool`. A template that names them gets them as they are. An assistant
// message's reasoning_content (or reasoning) is passed as `thinking` to a template that reads
// message.thinking (gpt-oss's: a tool call's analysis is kept until the turn's final answer).
// A null or empty tool_calls is removed (no calls).
nlohmann::json adapt_roles_to_template(nlohmann::json messages, std::string_view template_source);

}  // namespace nibble::server
