// libFuzzer: the JSON Schema front end. The input is a JSON text parsed with the server's depth
// limit (engine/text/json_depth.h), compiled as a schema, and its grammar matched against a few
// JSON values. Only StructuredError may come out.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/structured/grammar_matcher.h"
#include "engine/structured/output_spec.h"
#include "engine/structured/structured_error.h"
#include "engine/text/json_depth.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nibble;
  using namespace nibble::structured;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  OutputSpec spec;
  spec.kind = OutputKind::kJsonSchema;
  try {
    spec.schema =
        text::parse_json_with_max_depth<nlohmann::ordered_json>(text, text::kDefaultMaxJsonDepth);
  } catch (const text::JsonTooDeep&) {
    return 0;
  }
  if (spec.schema.is_discarded()) return 0;
  JsonGrammarOptions options;
  options.max_repeat = 50;
  options.max_elements = 100000;
  try {
    const Grammar g = build_grammar(spec, options);
    GrammarMatcher matcher(g);
    for (const char* value : {"{}", "[]", "\"a\"", "1", "-0.5e3", "null", "{\"a\": [1, true]}"}) {
      (void)matcher.accepts(value);
    }
  } catch (const StructuredError&) {
  }
  return 0;
}
