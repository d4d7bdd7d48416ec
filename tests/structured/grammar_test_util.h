#pragma once
// Helpers for the grammar tests: compile a spec and ask whether strings are sentences.
#include <memory>
#include <string>

#include "engine/structured/grammar_matcher.h"
#include "engine/structured/output_spec.h"
#include "engine/structured/structured_error.h"

namespace nibble::structured::testing {

struct CompiledForTest {
  Grammar grammar;
  std::unique_ptr<GrammarMatcher> matcher;
  bool accepts(const std::string& text) const { return matcher->accepts(text); }
  bool prefix(const std::string& text) const { return matcher->accepts_prefix(text); }
};

inline CompiledForTest compile(const OutputSpec& spec, JsonGrammarOptions options = {}) {
  CompiledForTest c{build_grammar(spec, options), nullptr};
  c.matcher = std::make_unique<GrammarMatcher>(c.grammar);
  return c;
}

inline CompiledForTest schema(const std::string& json_text, JsonGrammarOptions options = {}) {
  OutputSpec spec;
  spec.kind = OutputKind::kJsonSchema;
  spec.schema = nlohmann::ordered_json::parse(json_text);
  return compile(spec, options);
}

// The keyword (StructuredError::keyword) that compile() is refused for, or "accepted".
template <class Compile>
std::string refused_keyword(Compile compile) {
  try {
    compile();
  } catch (const StructuredError& e) {
    return e.keyword();
  }
  return "accepted";
}

inline CompiledForTest regex(const std::string& pattern) {
  OutputSpec spec;
  spec.kind = OutputKind::kRegex;
  spec.regex = pattern;
  return compile(spec);
}

}  // namespace nibble::structured::testing
