#pragma once
// tool_choice "required" or a named function as a grammar: the output is vLLM's forced shape
// (output_spec.h ToolCallSpec) with arguments constrained to the function's parameter schema,
// so the tool-call parser (engine/tool_calls, modes kRequired / kNamed) always finds a valid
// call, whatever the model family. "auto"/"none" (or no tools) constrain nothing.
#include <nlohmann/json.hpp>

#include <optional>

#include "engine/structured/output_spec.h"

namespace nibble::structured {

// Throws StructuredError (keyword "tool_choice", "tools" or a schema keyword) for a choice that
// names no offered function or malformed tools.
std::optional<OutputSpec> tool_call_grammar(const nlohmann::ordered_json& tools,
                                            const nlohmann::ordered_json& tool_choice,
                                            bool parallel_tool_calls);

}  // namespace nibble::structured
