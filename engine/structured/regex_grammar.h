#pragma once
// A regular expression compiled into grammar rules (for guided_regex and JSON Schema
// `pattern`/`format`). Supported: literals, `.`, classes `[...]`/`[^...]` with ranges, escapes
// (\d \D \w \W \s \S \n \t \r \f \v \xHH \uHHHH and escaped metacharacters), groups `(...)`,
// `(?:...)`, `(?<name>...)`, alternation, `* + ? {m} {m,} {m,n}` (lazy forms match the same
// strings), `^` at the start and `$` at the end. Anything else (backreferences, lookaround,
// word boundaries, inline flags) is refused with a StructuredError naming the construct.
#include <string_view>

#include "engine/structured/grammar.h"

namespace nibble::structured {

struct RegexOptions {
  // Full match (guided_regex) or search semantics unless ^/$ anchor it (JSON Schema pattern).
  bool implicit_anchors = true;
  // Emit the characters as they appear inside a JSON string literal: `"` and `\` escaped,
  // control characters as \n, \t, \u00XX escapes.
  bool json_string_content = false;
  int max_repeat = 1000;  // largest {m,n} bound accepted
  int max_depth = 128;    // deepest nesting of groups (the parser recurses once per group)
};

Symbol compile_regex(GrammarBuilder& builder, std::string_view pattern,
                     const RegexOptions& options = {});

}  // namespace nibble::structured
