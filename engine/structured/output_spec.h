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

// A forced tool call in vLLM's shapes, whatever the model family (engine/tool_calls reads them,
// ToolCallMode kRequired / kNamed):
//   required  [{"name": ..., "parameters": {...}}, ...]
//   named     the named function's arguments object alone
struct ToolCallSpec {
  std::vector<std::pair<std::string, nlohmann::ordered_json>> functions;  // name, parameters
  bool named = false;     // one function named by tool_choice: its arguments alone
  bool parallel = false;  // required: several calls allowed
};

struct OutputSpec {
  OutputKind kind = OutputKind::kJsonObject;
  nlohmann::ordered_json schema;     // kJsonSchema
  std::string regex;                 // kRegex
  std::vector<std::string> choices;  // kChoice
  ToolCallSpec tools;                // kToolCall
  // gpt-oss's harmony format: the constrained text is a message body, so the grammar writes its
  // header first, after an optional analysis message (whose text cannot hold '<'):
  //   [<|channel|>analysis<|message|>...<|end|><|start|>assistant]
  //   <|channel|>final<|message|>BODY                          (every kind but kToolCall)
  //   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGUMENTS (kToolCall:
  //   one call of one of the functions, as harmony ends the turn at a call)
  bool harmony = false;
  // Identifies the grammar: equal keys compile to the same grammar (the cache key).
  std::string cache_key() const;
};

// Throws StructuredError for what cannot be compiled.
Grammar build_grammar(const OutputSpec& spec, const JsonGrammarOptions& options);

}  // namespace nibble::structured
