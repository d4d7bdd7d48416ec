#include "engine/server/structured_output_request.h"

#include "engine/server/api_error.h"
#include "engine/server/bounded_json.h"
#include "engine/structured/structured_error.h"
#include "engine/structured/tool_call_grammar.h"

namespace nibble::server {
namespace {

using Json = nlohmann::ordered_json;
using structured::OutputKind;
using structured::OutputSpec;

constexpr const char* kFields[] = {"response_format", "structured_outputs", "guided_json",
                                   "guided_regex",    "guided_choice",      "guided_grammar"};

const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  return (it == body.end() || it->is_null()) ? nullptr : &*it;
}

OutputSpec json_schema_spec(const Json& schema, const std::string& param, int max_json_depth) {
  OutputSpec spec;
  spec.kind = OutputKind::kJsonSchema;
  if (schema.is_string()) {  // vLLM accepts the schema as a JSON string too
    spec.schema = parse_client_json<Json>(schema.get<std::string>(), max_json_depth,
                                          "'" + param + "'", param);
  } else if (schema.is_object() || schema.is_boolean()) {
    spec.schema = schema;
  } else {
    throw invalid_request("'" + param + "' must be a JSON Schema object", param);
  }
  return spec;
}

OutputSpec regex_spec(const Json& regex, const std::string& param) {
  if (!regex.is_string()) throw invalid_request("'" + param + "' must be a string", param);
  OutputSpec spec;
  spec.kind = OutputKind::kRegex;
  spec.regex = regex.get<std::string>();
  return spec;
}

OutputSpec choice_spec(const Json& choices, const std::string& param) {
  if (!choices.is_array() || choices.empty()) {
    throw invalid_request("'" + param + "' must be a non-empty array of strings", param);
  }
  OutputSpec spec;
  spec.kind = OutputKind::kChoice;
  for (const Json& c : choices) {
    if (!c.is_string() || c.get<std::string>().empty()) {
      throw invalid_request("'" + param + "' must be a non-empty array of non-empty strings",
                            param);
    }
    spec.choices.push_back(c.get<std::string>());
  }
  return spec;
}

std::optional<OutputSpec> response_format(const Json& v, int max_json_depth) {
  const std::string param = "response_format";
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string()) {
    throw invalid_request("'response_format' must be an object with a string 'type'", param);
  }
  const std::string type = v["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return OutputSpec{};
  if (type != "json_schema") {
    throw invalid_request(
        "'response_format.type' must be 'text', 'json_object' or "
        "'json_schema', got '" +
            type + "'",
        param);
  }
  const Json* js = field(v, "json_schema");
  if (!js || !js->is_object()) {
    throw invalid_request("'response_format.json_schema' must be an object", param);
  }
  const Json* name = field(*js, "name");
  if (name && !name->is_string()) {
    throw invalid_request("'response_format.json_schema.name' must be a string", param);
  }
  if (const Json* strict = field(*js, "strict"); strict && !strict->is_boolean()) {
    throw invalid_request("'response_format.json_schema.strict' must be a boolean", param);
  }
  // Without a schema, any JSON value (strict or not, the output is always constrained).
  const Json* schema = field(*js, "schema");
  return json_schema_spec(schema ? *schema : Json::object(), "response_format.json_schema.schema",
                          max_json_depth);
}

OutputSpec vllm_structured_outputs(const Json& v, int max_json_depth) {
  const std::string param = "structured_outputs";
  if (!v.is_object()) throw invalid_request("'structured_outputs' must be an object", param);
  std::optional<OutputSpec> spec;
  auto set = [&](OutputSpec s, const char* key) {
    if (spec) {
      throw invalid_request(
          "'structured_outputs' may hold only one of json, regex, choice, "
          "json_object; got more",
          param + "." + key);
    }
    spec = std::move(s);
  };
  for (const auto& [key, value] : v.items()) {
    if (value.is_null()) continue;
    if (key == "json") {
      set(json_schema_spec(value, param + ".json", max_json_depth), "json");
    } else if (key == "regex") {
      set(regex_spec(value, param + ".regex"), "regex");
    } else if (key == "choice") {
      set(choice_spec(value, param + ".choice"), "choice");
    } else if (key == "json_object") {
      if (value.is_boolean() && value.get<bool>()) set(OutputSpec{}, "json_object");
    } else if (key == "grammar" || key == "structural_tag") {
      throw invalid_request(
          "'structured_outputs." + key + "' is not supported; use json, regex or choice",
          param + "." + key);
    } else if (key != "disable_fallback" && key != "disable_any_whitespace" &&
               key != "disable_additional_properties" && key != "whitespace_pattern") {
      throw invalid_request("unknown field 'structured_outputs." + key + "'", param + "." + key);
    }
  }
  if (!spec) throw invalid_request("'structured_outputs' asks for nothing", param);
  return *spec;
}

}  // namespace

bool has_structured_output_fields(const nlohmann::json& body) {
  if (!body.is_object()) return false;
  for (const char* name : kFields) {
    if (body.contains(name) && !body[name].is_null()) return true;
  }
  return body.contains("tool_choice") && !body["tool_choice"].is_null();
}

std::optional<StructuredOutputRequest> parse_structured_output(const Json& body, bool chat,
                                                               int max_json_depth) {
  std::optional<StructuredOutputRequest> out;
  auto set = [&](std::optional<OutputSpec> spec, const char* param) {
    if (!spec) return;
    if (out) {
      throw invalid_request(std::string("'") + param + "' cannot be combined with '" + out->param +
                                "'; ask for one structured output",
                            param);
    }
    out = StructuredOutputRequest{std::move(*spec), param};
  };
  if (chat) {
    if (const Json* choice = field(body, "tool_choice")) {
      const Json* tools = field(body, "tools");
      const Json* parallel = field(body, "parallel_tool_calls");
      try {
        if (auto spec = structured::tool_call_grammar(tools ? *tools : Json(nullptr), *choice,
                                                      !parallel || parallel->get<bool>())) {
          out = StructuredOutputRequest{std::move(*spec), "tool_choice"};
          return out;  // the output is the call: response_format applies to content only
        }
      } catch (const structured::StructuredError& e) {
        throw invalid_request(e.what(), "tool_choice");
      } catch (const nlohmann::json::exception&) {
        throw invalid_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
      }
    }
  }
  if (const Json* v = field(body, "response_format"))
    set(response_format(*v, max_json_depth), "response_format");
  if (const Json* v = field(body, "structured_outputs"))
    set(vllm_structured_outputs(*v, max_json_depth), "structured_outputs");
  if (const Json* v = field(body, "guided_json"))
    set(json_schema_spec(*v, "guided_json", max_json_depth), "guided_json");
  if (const Json* v = field(body, "guided_regex"))
    set(regex_spec(*v, "guided_regex"), "guided_regex");
  if (const Json* v = field(body, "guided_choice"))
    set(choice_spec(*v, "guided_choice"), "guided_choice");
  if (field(body, "guided_grammar")) {
    throw invalid_request(
        "'guided_grammar' is not supported; use guided_json, guided_regex or "
        "guided_choice",
        "guided_grammar");
  }
  return out;
}

}  // namespace nibble::server
