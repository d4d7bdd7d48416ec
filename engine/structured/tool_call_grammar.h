#pragma once
// tool_choice "required" or a named function as a grammar: the output is the model family's
// tool-call markup around arguments constrained to the function's parameter schema, so the
// tool-call parser always finds a valid call. "auto"/"none" (or no tools) constrain nothing.
#include <nlohmann/json.hpp>

#include <optional>
#include <string_view>

#include "engine/structured/output_spec.h"

namespace nibble::structured {

// parser_name: vLLM's --tool-call-parser name ("hermes", "llama3_json"; Qwen's "qwen3_xml"
// style parsers are not grammar targets here). Throws StructuredError (keyword "tool_choice",
// "tools" or a schema keyword) for a choice that names no offered function, malformed tools,
// or a parser this grammar cannot target.
std::optional<OutputSpec> tool_call_grammar(const nlohmann::ordered_json& tools,
                                            const nlohmann::ordered_json& tool_choice,
                                            std::string_view parser_name, bool parallel_tool_calls);

}  // namespace nibble::structured
