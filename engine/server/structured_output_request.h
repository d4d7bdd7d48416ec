#pragma once
// The request fields that ask for structured outputs, in every spelling clients use:
//   response_format: {"type": "text" | "json_object" | "json_schema", "json_schema": {name,
//                    schema, strict, description}}                        (OpenAI)
//   structured_outputs: {"json" | "regex" | "choice" | "json_object": ...}  (vLLM)
//   guided_json, guided_regex, guided_choice                            (vLLM, older)
//   tool_choice "required" / a named function with tools                (chat only)
// At most one may be given (a forced tool call wins over response_format, as the output is the
// call). Errors are ApiError 400 naming the parameter.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "engine/structured/output_spec.h"

namespace nibble::server {

struct StructuredOutputRequest {
  structured::OutputSpec spec;
  std::string param;  // the request field it came from, for error messages
};

// Whether the body has any of the fields above (cheap, on the already parsed body).
bool has_structured_output_fields(const nlohmann::json& body);

// body is parsed with key order kept: objects are generated in the schema's property order.
// A schema sent as a JSON string is parsed with max_json_depth (bounded_json.h).
std::optional<StructuredOutputRequest> parse_structured_output(const nlohmann::ordered_json& body,
                                                               bool chat, int max_json_depth);

}  // namespace nibble::server
