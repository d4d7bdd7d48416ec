#include "engine/structured/tool_call_grammar.h"

#include <string>

#include "engine/structured/structured_error.h"

namespace nibble::structured {

using Json = nlohmann::ordered_json;

std::optional<OutputSpec> tool_call_grammar(const Json& tools, const Json& tool_choice,
                                            bool parallel_tool_calls) {
  std::string named;
  if (tool_choice.is_null()) return std::nullopt;
  if (tool_choice.is_string()) {
    const std::string choice = tool_choice.get<std::string>();
    if (choice == "auto" || choice == "none") return std::nullopt;
    if (choice != "required") {
      throw StructuredError(
          "'tool_choice' must be \"none\", \"auto\", \"required\" or "
          "{\"type\": \"function\", \"function\": {\"name\": ...}}",
          "tool_choice");
    }
  } else if (tool_choice.is_object() && tool_choice.contains("function") &&
             tool_choice["function"].is_object() && tool_choice["function"].contains("name") &&
             tool_choice["function"]["name"].is_string()) {
    named = tool_choice["function"]["name"].get<std::string>();
  } else {
    throw StructuredError(
        "'tool_choice' must be \"none\", \"auto\", \"required\" or "
        "{\"type\": \"function\", \"function\": {\"name\": ...}}",
        "tool_choice");
  }
  if (!tools.is_array() || tools.empty()) {
    throw StructuredError("'tool_choice' " + tool_choice.dump() + " needs a non-empty 'tools'",
                          "tool_choice");
  }
  OutputSpec spec;
  spec.kind = OutputKind::kToolCall;
  // One call when a function is named (as OpenAI does); several if the client allows them.
  spec.tools.named = !named.empty();
  spec.tools.parallel = named.empty() && parallel_tool_calls;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
        !tool["function"].contains("name") || !tool["function"]["name"].is_string()) {
      throw StructuredError(where +
                                " must be {\"type\": \"function\", \"function\": {\"name\": "
                                "..., \"parameters\": {...}}}",
                            "tools");
    }
    const std::string name = tool["function"]["name"].get<std::string>();
    if (!named.empty() && name != named) continue;
    Json parameters =
        tool["function"].contains("parameters") && !tool["function"]["parameters"].is_null()
            ? tool["function"]["parameters"]
            : Json{{"type", "object"},
                   {"properties", Json::object()},
                   {"additionalProperties", false}};
    spec.tools.functions.emplace_back(name, std::move(parameters));
  }
  if (spec.tools.functions.empty()) {
    throw StructuredError("'tool_choice' names function '" + named + "', which is not in 'tools'",
                          "tool_choice");
  }
  return spec;
}

}  // namespace nibble::structured
