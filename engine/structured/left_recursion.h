#pragma once
// Refuses grammars that can reach a rule again without consuming a byte (left recursion,
// direct or through nullable prefixes): the pushdown matcher would expand such a rule forever.
// JSON Schema reaches this with a `$ref` (or an `anyOf` option) that refers back to its own
// schema before any object or array opens. Linear in the grammar's size and free of
// recursion, so a grammar of any shape is checked without growing the call stack.
#include "engine/structured/grammar.h"

namespace nibble::structured {

// Throws StructuredError (keyword "$ref") naming the cycle's rules, e.g.
// 'ref #' -> 'anyOf' -> 'ref #'.
void check_not_left_recursive(const Grammar& grammar);

}  // namespace nibble::structured
