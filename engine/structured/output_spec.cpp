#include "engine/structured/output_spec.h"

#include "engine/structured/left_recursion.h"
#include "engine/structured/regex_grammar.h"
#include "engine/structured/structured_error.h"

namespace nibble::structured {
namespace {

Symbol tool_call(GrammarBuilder& b, const ToolCallSpec& spec, const JsonGrammarOptions& options,
                 bool harmony) {
  std::vector<std::vector<Symbol>> alts;
  for (const auto& [name, parameters] : spec.functions) {
    Symbol args;
    try {
      args = compile_json_schema(b, parameters, options);
    } catch (const StructuredError& e) {
      throw StructuredError("tool '" + name + "' parameters: " + e.what(), e.keyword());
    }
    if (harmony) {
      alts.push_back({b.literal("<|channel|>commentary to=functions." + name +
                                " <|constrain|>json<|message|>"),
                      args});
      continue;
    }
    if (spec.named) return args;
    const std::string head =
        "{\"name\": " + nlohmann::ordered_json(name).dump() + ", \"parameters\": ";
    alts.push_back({b.literal(head), args, b.literal("}")});
  }
  if (harmony) return b.choice("harmony tool call", alts);
  const Symbol call = b.choice("tool call", alts);
  const Symbol calls = b.repeat("tool calls", call, 1, spec.parallel ? -1 : 1, {b.literal(", ")});
  return b.choice("tool call list", {{b.literal("["), calls, b.literal("]")}});
}

// The optional analysis message a harmony answer may open with.
Symbol harmony_analysis(GrammarBuilder& b) {
  ByteSet text;
  text.add_range(0, '<' - 1);
  text.add_range('<' + 1, 255);
  const Symbol body = b.repeat("analysis text", b.byte_set(text), 0, -1);
  const Symbol message =
      b.choice("analysis message", {{b.literal("<|channel|>analysis<|message|>"), body,
                                     b.literal("<|end|><|start|>assistant")}});
  return b.repeat("optional analysis", message, 0, 1);
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
  if (harmony) key["harmony"] = true;
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
      top = tool_call(b, spec.tools, options, spec.harmony);
      break;
  }
  const int root = b.new_rule("root");
  if (!spec.harmony) {
    b.add_alternative(root, {top});
  } else if (spec.kind == OutputKind::kToolCall) {
    b.add_alternative(root, {harmony_analysis(b), top});
  } else {
    b.add_alternative(root, {harmony_analysis(b), b.literal("<|channel|>final<|message|>"), top});
  }
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
