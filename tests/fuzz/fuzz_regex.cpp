// libFuzzer: the regex front end (guided_regex and JSON Schema `pattern`). The input is the
// pattern; its grammar, if it compiles, is built and matched against the pattern's own bytes.
// Only StructuredError may come out.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/structured/grammar_matcher.h"
#include "engine/structured/output_spec.h"
#include "engine/structured/structured_error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nibble::structured;
  OutputSpec spec;
  spec.kind = OutputKind::kRegex;
  spec.regex.assign(reinterpret_cast<const char*>(data), size);
  JsonGrammarOptions options;
  options.max_repeat = 50;  // keeps each input fast; the bound itself is tested elsewhere
  try {
    const Grammar g = build_grammar(spec, options);
    GrammarMatcher matcher(g);
    (void)matcher.accepts(spec.regex);
    (void)matcher.accepts_prefix("a");
  } catch (const StructuredError&) {
  }
  return 0;
}
