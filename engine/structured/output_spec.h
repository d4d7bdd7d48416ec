#pragma once
// What a request asks the output to be (response_format, structured_outputs, guided_*, a
// forced tool call), independent of how the request spelled it, and its grammar.
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "engine/structured/grammar.h"
#include "engine/structured/json_schema_grammar.h"

namespace nibble::structured {

enum class OutputKind { kJsonSchema, kJsonObject, kRegex, kChoice, kToolCall };
const char* output_kind_name(OutputKind kind);  // json_schema, json_object, regex, ...

// Tool-call markup of a model family, by vLLM's --tool-call-parser names.
enum class ToolCallFormat {
  kHermes,      // Qwen2/3, Hermes: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
  kLlama3Json,  // Llama 3.1/3.2: {"name": ..., "parameters": ...}
};

struct ToolCallSpec {
  std::vector<std::pair<std::string, nlohmann::ordered_json>> functions;  // name, parameters
  ToolCallFormat format = ToolCallFormat::kHermes;
  bool parallel = false;  // several calls allowed (hermes only)
};

struct OutputSpec {
  OutputKind kind = OutputKind::kJsonObject;
  nlohmann::ordered_json schema;     // kJsonSchema
  std::string regex;                 // kRegex
  std::vector<std::string> choices;  // kChoice
  ToolCallSpec tools;                // kToolCall
  // Identifies the grammar: equal keys compile to the same grammar (the cache key).
  std::string cache_key() const;
};

// Throws StructuredError for what cannot be compiled.
Grammar build_grammar(const OutputSpec& spec, const JsonGrammarOptions& options);

}  // namespace nibble::structured
