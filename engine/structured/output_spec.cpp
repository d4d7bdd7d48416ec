#include "engine/structured/output_spec.h"

#include "engine/structured/left_recursion.h"
#include "engine/structured/regex_grammar.h"
#include "engine/structured/structured_error.h"

namespace nibble::structured {
namespace {

Symbol tool_call(GrammarBuilder& b, const ToolCallSpec& spec, const JsonGrammarOptions& options) {
  std::vector<std::vector<Symbol>> alts;
  for (const auto& [name, parameters] : spec.functions) {
    Symbol args;
    try {
      args = compile_json_schema(b, parameters, options);
    } catch (const StructuredError& e) {
      throw StructuredError("tool '" + name + "' parameters: " + e.what(), e.keyword());
    }
    if (spec.named) return args;
    const std::string head =
        "{\"name\": " + nlohmann::ordered_json(name).dump() + ", \"parameters\": ";
    alts.push_back({b.literal(head), args, b.literal("}")});
  }
  const Symbol call = b.choice("tool call", alts);
  const Symbol calls = b.repeat("tool calls", call, 1, spec.parallel ? -1 : 1, {b.literal(", ")});
  return b.choice("tool call list", {{b.literal("["), calls, b.literal("]")}});
}

}  // namespace

const char* output_kind_name(OutputKind kind) {
  switch (kind) {
    case OutputKind::kJsonSchema:
      return "json_schema";
    case OutputKind::kJsonObject:
      return "json_object";
    case OutputKind::kRegex:
      return "regex";
    case OutputKind::kChoice:
      return "choice";
    case OutputKind::kToolCall:
      return "tool_call";
  }
  return "unknown";
}

std::string OutputSpec::cache_key() const {
  nlohmann::ordered_json key = {{"kind", output_kind_name(kind)}};
  switch (kind) {
    case OutputKind::kJsonSchema:
      key["schema"] = schema;
      break;
    case OutputKind::kJsonObject:
      break;
    case OutputKind::kRegex:
      key["regex"] = regex;
      break;
    case OutputKind::kChoice:
      key["choices"] = choices;
      break;
    case OutputKind::kToolCall:
      key["functions"] = tools.functions;
      key["named"] = tools.named;
      key["parallel"] = tools.parallel;
      break;
  }
  return key.dump();
}

Grammar build_grammar(const OutputSpec& spec, const JsonGrammarOptions& options) {
  GrammarBuilder b;
  Symbol top;
  switch (spec.kind) {
    case OutputKind::kJsonSchema:
      top = compile_json_schema(b, spec.schema, options);
      break;
    case OutputKind::kJsonObject:
      top = compile_any_json_object(b, options);
      break;
    case OutputKind::kRegex: {
      RegexOptions regex;
      regex.max_repeat = options.max_repeat;
      regex.max_depth = options.max_depth;
      top = compile_regex(b, spec.regex, regex);
      break;
    }
    case OutputKind::kChoice: {
      if (spec.choices.empty()) throw StructuredError("the choice list is empty", "choice");
      std::vector<std::vector<Symbol>> alts;
      for (const std::string& c : spec.choices) alts.push_back({b.literal(c)});
      top = b.choice("choice", alts);
      break;
    }
    case OutputKind::kToolCall:
      if (spec.tools.functions.empty()) throw StructuredError("no tools to call", "tools");
      top = tool_call(b, spec.tools, options);
      break;
  }
  const int root = b.new_rule("root");
  b.add_alternative(root, {top});
  Grammar g = b.build(root);
  if (int(g.elements.size()) > options.max_elements) {
    throw StructuredError("the grammar has " + std::to_string(g.elements.size()) +
                              " elements, above the limit of " +
                              std::to_string(options.max_elements),
                          "schema");
  }
  check_not_left_recursive(g);
  return g;
}

}  // namespace nibble::structured
