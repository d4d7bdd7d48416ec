#pragma once
// JSON Schema compiled into grammar rules: the subset the OpenAI API documents for strict
// structured outputs, so that every sentence of the grammar is a JSON text valid against the
// schema.
//
// Supported: type (one or an array), properties, required, additionalProperties (false,
// true, or a schema for objects without properties), items, minItems, maxItems, enum, const,
// anyOf, $ref into the document (#, #/$defs/..., #/definitions/..., any JSON pointer;
// recursion allowed), $defs, definitions, minLength, maxLength, pattern, format (date-time,
// date, time, duration, email, hostname, ipv4, ipv6, uuid); annotations (title, description,
// default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored.
// Anything else is refused with a StructuredError naming the keyword and where it is.
//
// Objects are generated with their declared properties in schema order (optional ones may be
// left out); extra properties only when the schema declares none. Whitespace between tokens
// is at most `max_whitespace` bytes of [ \t\n] per gap, so a model cannot spin in it.
#include <nlohmann/json.hpp>

#include "engine/structured/grammar.h"

namespace nibble::structured {

struct JsonGrammarOptions {
  int max_whitespace = 2;     // bytes of whitespace allowed in each gap between JSON tokens
  int max_repeat = 1000;      // largest maxItems / maxLength unrolled into the grammar
  int max_elements = 500000;  // grammar size limit: larger schemas are refused
  // Deepest nesting of subschemas (a chain of $ref targets counts too) and of regex groups in
  // `pattern`; deeper ones are refused before they can exhaust the call stack.
  int max_depth = 128;
};

Symbol compile_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema,
                           const JsonGrammarOptions& options = {});

// Any JSON object (response_format json_object).
Symbol compile_any_json_object(GrammarBuilder& builder, const JsonGrammarOptions& options = {});

}  // namespace nibble::structured
