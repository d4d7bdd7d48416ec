#pragma once
// The tool-use fields of a chat request: `tools`, `tool_choice`, `parallel_tool_calls`, and
// the tool-call parts of `messages` (assistant `tool_calls`, `role: tool` results), validated
// with a 400 naming the field. OpenAI's defaults: tool_choice is "auto" when tools are given,
// "none" otherwise.
#include <nlohmann/json.hpp>

#include <string>

namespace nibble::server {

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };
const char* tool_choice_name(ToolChoice choice);

struct ToolRequest {
  nlohmann::json tools = nullptr;  // null, or the validated array as sent
  ToolChoice choice = ToolChoice::kNone;
  std::string named_function;  // kNamed: the function's name, one of `tools`
  bool parallel_tool_calls = true;
};

// Throws ApiError 400 (param "tools", "tool_choice" or "parallel_tool_calls").
ToolRequest parse_tool_request(const nlohmann::json& body, int max_tools);

// Checks the tool-call parts of `messages` (400, param "messages"): assistant tool_calls are
// [{id, type: "function", function: {name, arguments}}] with arguments a JSON text or object,
// and a tool message names its tool_call_id. Arguments sent as a JSON string may nest at most
// max_json_depth levels (bounded_json.h).
void validate_tool_messages(const nlohmann::json& messages, int max_json_depth);

// The messages as chat templates expect them, as vLLM and transformers give them: a tool call's
// arguments sent as a JSON string become the object it encodes (key order kept), so that
// templates that write `tool_call.arguments | tojson` print it once, not as a quoted string.
void parse_tool_call_arguments(nlohmann::ordered_json& messages, int max_json_depth);

}  // namespace nibble::server
