#include "engine/server/tool_request.h"

#include "engine/server/api_error.h"
#include "engine/server/bounded_json.h"

namespace nibble::server {
namespace {

using nlohmann::json;

// OpenAI's rule for function names: a-z, A-Z, 0-9, underscores and dashes, at most 64.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

const json* member(const json& object, const char* name) {
  auto it = object.find(name);
  return (it == object.end() || it->is_null()) ? nullptr : &*it;
}

std::string function_name_of(const json& tool, const std::string& where) {
  const json* function = member(tool, "function");
  if (!function || !function->is_object())
    throw invalid_request(where + ".function must be an object", "tools");
  const json* name = member(*function, "name");
  if (!name || !name->is_string() || !valid_function_name(name->get<std::string>())) {
    throw invalid_request(where +
                              ".function.name must be a string of 1 to 64 letters, digits, "
                              "underscores or dashes",
                          "tools");
  }
  if (const json* d = member(*function, "description"); d && !d->is_string())
    throw invalid_request(where + ".function.description must be a string", "tools");
  if (const json* p = member(*function, "parameters"); p && !p->is_object())
    throw invalid_request(where + ".function.parameters must be a JSON Schema object", "tools");
  if (const json* s = member(*function, "strict"); s && !s->is_boolean())
    throw invalid_request(where + ".function.strict must be a boolean", "tools");
  return name->get<std::string>();
}

}  // namespace

const char* tool_choice_name(ToolChoice choice) {
  switch (choice) {
    case ToolChoice::kNone:
      return "none";
    case ToolChoice::kAuto:
      return "auto";
    case ToolChoice::kRequired:
      return "required";
    case ToolChoice::kNamed:
      return "function";
  }
  return "none";
}

ToolRequest parse_tool_request(const json& body, int max_tools) {
  ToolRequest r;
  std::vector<std::string> names;
  if (const json* tools = member(body, "tools")) {
    if (!tools->is_array()) throw invalid_request("'tools' must be an array", "tools");
    if (int(tools->size()) > max_tools) {
      throw invalid_request("'tools' may hold at most " + std::to_string(max_tools) + " tools",
                            "tools");
    }
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const json& tool = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object()) throw invalid_request(where + " must be an object", "tools");
      const json* type = member(tool, "type");
      if (!type || *type != "function")
        throw invalid_request(where + ".type must be \"function\"", "tools");
      std::string name = function_name_of(tool, where);
      if (std::find(names.begin(), names.end(), name) != names.end())
        throw invalid_request(where + ": the function name '" + name + "' is used twice", "tools");
      names.push_back(std::move(name));
    }
    if (!tools->empty()) r.tools = *tools;
  }
  r.choice = names.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (const json* choice = member(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") {
        r.choice = ToolChoice::kNone;
      } else if (c == "auto" || c == "required") {
        r.choice = c == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
      } else {
        throw invalid_request(
            "'tool_choice' must be \"none\", \"auto\", \"required\" or "
            "{\"type\": \"function\", \"function\": {\"name\": ...}}, got \"" +
                c + "\"",
            "tool_choice");
      }
    } else if (choice->is_object()) {
      const json* function = member(*choice, "function");
      const json* name = function && function->is_object() ? member(*function, "name") : nullptr;
      if (member(*choice, "type") == nullptr || (*choice)["type"] != "function" || !name ||
          !name->is_string()) {
        throw invalid_request(
            "'tool_choice' as an object must be {\"type\": \"function\", \"function\": "
            "{\"name\": ...}}",
            "tool_choice");
      }
      r.named_function = name->get<std::string>();
      if (std::find(names.begin(), names.end(), r.named_function) == names.end()) {
        throw invalid_request(
            "'tool_choice' names the function '" + r.named_function + "', which is not in 'tools'",
            "tool_choice");
      }
      r.choice = ToolChoice::kNamed;
    } else {
      throw invalid_request("'tool_choice' must be a string or an object", "tool_choice");
    }
    if (r.choice != ToolChoice::kNone && names.empty()) {
      throw invalid_request("'tool_choice' \"" + std::string(tool_choice_name(r.choice)) +
                                "\" needs a non-empty 'tools'",
                            "tool_choice");
    }
  }
  if (const json* parallel = member(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean())
      throw invalid_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    r.parallel_tool_calls = parallel->get<bool>();
  }
  return r;
}

void validate_tool_messages(const json& messages, int max_json_depth) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    const std::string role = m.value("role", "");
    if (role == "tool") {
      const json* id = member(m, "tool_call_id");
      if (!id || !id->is_string())
        throw invalid_request(where + ".tool_call_id must be a string (the call it answers)",
                              "messages");
    }
    const json* calls = member(m, "tool_calls");
    if (!calls) continue;
    if (role != "assistant")
      throw invalid_request(where + ".tool_calls is only allowed on assistant messages",
                            "messages");
    if (!calls->is_array())
      throw invalid_request(where + ".tool_calls must be an array", "messages");
    for (std::size_t k = 0; k < calls->size(); ++k) {
      const json& call = (*calls)[k];
      const std::string at = where + ".tool_calls[" + std::to_string(k) + "]";
      if (!call.is_object()) throw invalid_request(at + " must be an object", "messages");
      if (const json* id = member(call, "id"); id && !id->is_string())
        throw invalid_request(at + ".id must be a string", "messages");
      const json* function = member(call, "function");
      const json* name = function && function->is_object() ? member(*function, "name") : nullptr;
      if (!name || !name->is_string())
        throw invalid_request(at + ".function.name must be a string", "messages");
      const json* args = member(*function, "arguments");
      if (args && args->is_string()) {
        parse_client_json<json>(args->get<std::string>(), max_json_depth,
                                at + ".function.arguments", "messages");
      } else if (args && !args->is_object()) {
        throw invalid_request(at + ".function.arguments must be a JSON string or an object",
                              "messages");
      }
    }
  }
}

void parse_tool_call_arguments(nlohmann::ordered_json& messages, int max_json_depth) {
  for (auto& m : messages) {
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (auto& call : *calls) {
      auto function = call.find("function");
      if (function == call.end() || !function->is_object()) continue;
      auto args = function->find("arguments");
      if (args != function->end() && args->is_string()) {
        *args = parse_client_json<nlohmann::ordered_json>(args->get<std::string>(), max_json_depth,
                                                          "a tool call's arguments", "messages");
      }
    }
  }
}

}  // namespace nibble::server
